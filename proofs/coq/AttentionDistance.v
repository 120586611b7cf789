(* AttentionDistance.v — proofs/attention-distance.md (1), with row-masks: masked entries exactly 0.

   Row i of the instance A and of its replacement A' (N keys each).  Row i sees the keys in vis
   (kept, inside the row mask, with its sinks), the replacement's row sees vis'; off its visible set
   an attention row is exactly 0, and the kernel's enclosure m_i is set to an exact 0 there too
   (row-masks).  The enclosures are bounds over the visible keys only:
       sum_{j in vis} |A_ij - m_ij| <= rho_i,   sum_{j in vis'} |A'_ij - m'_ij| <= rho'_i.
   Then, summing over all N keys,
       ||A_i - A'_i||_1 <= ||m_i - m'_i||_1 + rho_i + rho'_i   (and conversely with A, m swapped).
   The matrix form: if the kernel's per-row number e_i is >= ||m_i - m'_i||_1 + rho_i + rho'_i and
   e_i <= eps for every row, then delta(A, A') = max_i ||A_i - A'_i||_1 <= eps. *)
From mathcomp Require Import all_ssreflect all_algebra.
From Certkit Require Import Norms.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory Order.Theory.
Open Scope ring_scope.

Section AttentionDistance.
Variable R : realFieldType.

Definition l1 N (x : 'I_N -> R) : R := \sum_j `|x j|.

(* an enclosure over the visible keys is an enclosure over all keys when both sides are 0 elsewhere *)
Lemma masked_l1 N (A m : 'I_N -> R) (vis : pred 'I_N) :
  (forall j, ~~ vis j -> A j = 0 /\ m j = 0) ->
  \sum_j `|A j - m j| = \sum_(j | vis j) `|A j - m j|.
Proof.
move=> Hm; rewrite [RHS]big_mkcond /=; apply: eq_bigr => j _.
by case: ifP => // /negbT /Hm [-> ->]; rewrite subrr normr0.
Qed.

Lemma l1_triangle3 N (a b c d : 'I_N -> R) :
  \sum_j `|a j - d j| <= \sum_j `|a j - b j| + \sum_j `|b j - c j| + \sum_j `|c j - d j|.
Proof.
rewrite -!big_split /=; apply: ler_sum => j _.
apply: le_trans (ler_dist_add (c j) _ _) _; rewrite ler_add2r.
exact: ler_dist_add.
Qed.

Theorem distance_triangle N (A A' m m' : 'I_N -> R) (vis vis' : pred 'I_N) (rho rho' : R) :
  (forall j, ~~ vis j -> A j = 0 /\ m j = 0) ->
  (forall j, ~~ vis' j -> A' j = 0 /\ m' j = 0) ->
  \sum_(j | vis j) `|A j - m j| <= rho ->
  \sum_(j | vis' j) `|A' j - m' j| <= rho' ->
  \sum_j `|A j - A' j| <= \sum_j `|m j - m' j| + rho + rho'.
Proof.
move=> HA HA' E E'; rewrite -(masked_l1 HA) in E; rewrite -(masked_l1 HA') in E'.
have E'' : \sum_j `|m' j - A' j| <= rho'.
  by apply: le_trans E'; rewrite le_eqVlt; apply/orP; left; apply/eqP/eq_bigr => j _; rewrite distrC.
apply: le_trans (l1_triangle3 A m m' A') _.
apply: le_trans (ler_add (ler_add E (lexx _)) E'') _.
by rewrite [rho + _]addrC.
Qed.

Theorem distance_triangle_converse N (A A' m m' : 'I_N -> R) (vis vis' : pred 'I_N) (rho rho' : R) :
  (forall j, ~~ vis j -> A j = 0 /\ m j = 0) ->
  (forall j, ~~ vis' j -> A' j = 0 /\ m' j = 0) ->
  \sum_(j | vis j) `|A j - m j| <= rho ->
  \sum_(j | vis' j) `|A' j - m' j| <= rho' ->
  \sum_j `|m j - m' j| <= \sum_j `|A j - A' j| + rho + rho'.
Proof.
move=> HA HA' E E'; rewrite -(masked_l1 HA) in E; rewrite -(masked_l1 HA') in E'.
have E'' : \sum_j `|m j - A j| <= rho.
  by apply: le_trans E; rewrite le_eqVlt; apply/orP; left; apply/eqP/eq_bigr => j _; rewrite distrC.
apply: le_trans (l1_triangle3 m A A' m') _.
apply: le_trans (ler_add (ler_add E'' (lexx _)) E') _.
by rewrite [rho + _]addrC.
Qed.

(* The rule attention-distance: per-row numbers e_i above the triangle's right side, all <= eps,
   give delta(A, A') <= eps. *)
Theorem attention_distance_rule n N (A A' m m' : 'M[R]_(n, N)) (vis vis' : 'I_n -> pred 'I_N)
    (rho rho' e : 'I_n -> R) (eps : R) :
  0 <= eps ->
  (forall i j, ~~ vis i j -> A i j = 0 /\ m i j = 0) ->
  (forall i j, ~~ vis' i j -> A' i j = 0 /\ m' i j = 0) ->
  (forall i, \sum_(j | vis i j) `|A i j - m i j| <= rho i) ->
  (forall i, \sum_(j | vis' i j) `|A' i j - m' i j| <= rho' i) ->
  (forall i, \sum_j `|m i j - m' i j| + rho i + rho' i <= e i) ->
  (forall i, e i <= eps) ->
  infnorm (A - A') <= eps.
Proof.
move=> eps0 HA HA' E E' He Heps; apply: infnorm_le => // i.
have -> : rowl1 (A - A') i = \sum_j `|A i j - A' i j|.
  by apply: eq_bigr => j _; rewrite !mxE.
apply: le_trans (Heps i); apply: le_trans (He i).
exact: (distance_triangle (HA i) (HA' i) (E i) (E' i)).
Qed.

End AttentionDistance.
