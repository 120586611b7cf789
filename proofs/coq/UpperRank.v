(* UpperRank.v — the upper-bound rules: proofs/factor-rank.md and proofs/cover-rank.md.

   r_e(A) <= k is stated as reps_le A e k: some B with max_i ||A_i - B_i||_1 <= e has rank <= k
   (Norms.v).  B = U V^T is the EXACT product of the stored factors (never fl(U V^T)).

   factor_rank        : max_i ||A_i - (U V^T)_i||_1 <= eps  ==>  r_eps(A) <= k        (U: n x k)
   factor_rank_rule   : the kernel's chain  ||A_i - B_i||_1 <= rho_i + sum_j |m_ij - B^_ij|
                        + sum_j |B^_ij - B_ij|  (any matrix B^, e.g. the float product), with the
                        row enclosure over the visible keys and masked entries exactly 0
   cover_rank_general : rows replaced by representative vectors c_{tau(i)} (k of them) ==> <= k
   cover_rank         : R a set of rows, sigma(i) in R, ||A_i - A_sigma(i)||_1 <= eps
                        ==> r_eps(A) <= rank(A_R) <= |R|
   cover_rank_rule    : the kernel's test per row (a row that represents itself counts 0, else
                        rho_i + rho_sigma(i) + ||m_i - m_sigma(i)||_1 <= eps) ==> r_eps(A) <= |R| *)
From mathcomp Require Import all_ssreflect all_algebra.
From Certkit Require Import Norms AttentionDistance.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory Order.Theory.
Open Scope ring_scope.

Section UpperRank.
Variable R : realFieldType.

Lemma rank_factor n N k (U : 'M[R]_(n, k)) (V : 'M[R]_(N, k)) : (\rank (U *m V^T) <= k)%N.
Proof. exact: leq_trans (mxrankM_maxl _ _) (rank_leq_col U). Qed.

Theorem factor_rank n N k (A : 'M[R]_(n, N)) (U : 'M[R]_(n, k)) (V : 'M[R]_(N, k)) (eps : R) :
  feasible A eps (U *m V^T) -> reps_le A eps k.
Proof. by move=> F; exists (U *m V^T); split; [exact: F | exact: rank_factor]. Qed.

Theorem factor_rank_rule n N k (A m Bh : 'M[R]_(n, N)) (U : 'M[R]_(n, k)) (V : 'M[R]_(N, k))
    (vis : 'I_n -> pred 'I_N) (rho : 'I_n -> R) (eps : R) :
  (forall i j, ~~ vis i j -> A i j = 0 /\ m i j = 0) ->
  (forall i, \sum_(j | vis i j) `|A i j - m i j| <= rho i) ->
  (forall i, rho i + \sum_j `|m i j - Bh i j| + \sum_j `|Bh i j - (U *m V^T) i j| <= eps) ->
  reps_le A eps k.
Proof.
move=> HA E He; apply: (factor_rank (U := U) (V := V)) => i.
apply: le_trans (He i); have Ei := E i; rewrite -(masked_l1 (HA i)) in Ei.
have -> : rowl1 (A - U *m V^T) i = \sum_j `|A i j - (U *m V^T) i j|.
  by apply: eq_bigr => j _; rewrite !mxE.
apply: le_trans (l1_triangle3 (A i) (m i) (Bh i) _) _.
by rewrite ler_add2r ler_add2r.
Qed.

Theorem cover_rank_general n N k (A : 'M[R]_(n, N)) (C : 'M[R]_(k, N)) (tau : 'I_n -> 'I_k)
    (eps : R) :
  (forall i, \sum_j `|A i j - C (tau i) j| <= eps) ->
  exists B : 'M[R]_(n, N), feasible A eps B /\ (\rank B <= \rank C)%N /\ (\rank C <= k)%N.
Proof.
move=> H; pose P : 'M[R]_(n, k) := \matrix_(i, r) (r == tau i)%:R.
have PC : P *m C = \matrix_(i, j) C (tau i) j.
  apply/matrixP => i j; rewrite !mxE (bigD1 (tau i)) //= mxE eqxx mul1r big1 ?addr0 //.
  by move=> r /negbTE ne; rewrite mxE ne mul0r.
exists (P *m C); split; last by split; [exact: mxrankM_maxr | exact: rank_leq_row].
move=> i; apply: le_trans (H i); rewrite le_eqVlt; apply/orP; left; apply/eqP.
by apply: eq_bigr => j _; rewrite PC !mxE.
Qed.

Theorem cover_rank n N (A : 'M[R]_(n, N)) (Rs : {set 'I_n}) (sigma : 'I_n -> 'I_n) (eps : R) :
  (forall i, sigma i \in Rs) ->
  (forall i, \sum_j `|A i j - A (sigma i) j| <= eps) ->
  let A_R : 'M[R]_(#|Rs|, N) := \matrix_(r, j) A (enum_val r) j in
  exists B : 'M[R]_(n, N), feasible A eps B /\ (\rank B <= \rank A_R)%N /\ (\rank A_R <= #|Rs|)%N.
Proof.
move=> hR H A_R.
pose tau i := enum_rank_in (hR i) (sigma i).
apply: (cover_rank_general (tau := tau)) => i.
apply: le_trans (H i); rewrite le_eqVlt; apply/orP; left; apply/eqP.
by apply: eq_bigr => j _; rewrite mxE /tau enum_rankK_in.
Qed.

Corollary cover_rank_le n N (A : 'M[R]_(n, N)) (Rs : {set 'I_n}) (sigma : 'I_n -> 'I_n) (eps : R) :
  (forall i, sigma i \in Rs) ->
  (forall i, \sum_j `|A i j - A (sigma i) j| <= eps) ->
  reps_le A eps #|Rs|.
Proof.
move=> hR H; have [B [FB [r1 r2]]] := cover_rank hR H.
by exists B; split=> //; exact: leq_trans r1 r2.
Qed.

Theorem cover_rank_rule n N (A m : 'M[R]_(n, N)) (Rs : {set 'I_n}) (sigma : 'I_n -> 'I_n)
    (vis : 'I_n -> pred 'I_N) (rho : 'I_n -> R) (eps : R) :
  0 <= eps ->
  (forall i, sigma i \in Rs) ->
  (forall i j, ~~ vis i j -> A i j = 0 /\ m i j = 0) ->
  (forall i, \sum_(j | vis i j) `|A i j - m i j| <= rho i) ->
  (forall i, sigma i = i \/
             \sum_j `|m i j - m (sigma i) j| + rho i + rho (sigma i) <= eps) ->
  reps_le A eps #|Rs|.
Proof.
move=> eps0 hR HA E He; apply: (cover_rank_le hR) => i.
case: (He i) => [-> | h].
  by rewrite big1 // => j _; rewrite subrr normr0.
apply: le_trans h.
exact: (distance_triangle (HA i) (HA (sigma i)) (E i) (E (sigma i))).
Qed.

End UpperRank.
