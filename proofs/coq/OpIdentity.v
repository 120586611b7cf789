(* OpIdentity.v — proofs/op-identity.md (docs/mathematics.md Lemma 1.1), finite dimensions.

   For a matrix D (n x N) and any number p >= 1 of value columns,
       max_i ||D_i||_1 = max { max_i ||(D V)_i||_inf : V in R^{N x p}, |V_jl| <= 1 },
   the maximum on the right being attained at V_jl = sign(D_{i* j}) for a row i* attaining the
   left side.  With D = A - B (or A - A') this is the meaning of every certkit claim: the worst
   attention-output error over value matrices with entries in [-1, 1] is max_i ||A_i - B_i||_1.
   p = 1 is the scalar case (||D||_{inf -> inf}). *)
From mathcomp Require Import all_ssreflect all_algebra.
From Certkit Require Import Norms.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory Order.Theory.
Open Scope ring_scope.

Section OpIdentity.
Variable R : realFieldType.

Definition sgn1 (x : R) : R := if 0 <= x then 1 else -1.

Lemma mul_sgn1 x : x * sgn1 x = `|x|.
Proof.
rewrite /sgn1; case: ifP => h; first by rewrite mulr1 (ger0_norm h).
by rewrite mulrN1 ltr0_norm // ltNge h.
Qed.

Lemma norm_sgn1 x : `|sgn1 x| = 1.
Proof. by rewrite /sgn1; case: ifP; rewrite ?normrN normr1. Qed.

(* (<=), one row and one value column at a time *)
Lemma op_identity_row n N p (D : 'M[R]_(n, N)) (V : 'M[R]_(N, p)) i l :
  (forall j l, `|V j l| <= 1) -> `|(D *m V) i l| <= rowl1 D i.
Proof.
move=> V1; rewrite mxE; apply: le_trans (ler_norm_sum _ _ _) _.
apply: ler_sum => j _; rewrite normrM -{2}(mulr1 `|D i j|).
by rewrite ler_wpmul2l ?normr_ge0.
Qed.

Theorem op_identity_le n N p (D : 'M[R]_(n, N)) (V : 'M[R]_(N, p)) :
  (forall j l, `|V j l| <= 1) -> maxentry (D *m V) <= infnorm D.
Proof.
move=> V1; apply: bigmax_le (infnorm_ge0 D) _ => i.
apply: bigmax_le (infnorm_ge0 D) _ => l.
apply: le_trans (infnorm_ge D i); exact: op_identity_row.
Qed.

(* the sign matrix of row i: every value vector v_j = sign(D_ij) (1, ..., 1) *)
Definition sign_values n N p (D : 'M[R]_(n, N)) (i : 'I_n) : 'M[R]_(N, p) :=
  \matrix_(j, l) sgn1 (D i j).

Lemma sign_values_row n N p (D : 'M[R]_(n, N)) i l :
  (D *m sign_values p D i) i l = rowl1 D i.
Proof. by rewrite mxE; apply: eq_bigr => j _; rewrite mxE mul_sgn1. Qed.

(* (>=) and attainment *)
Theorem op_identity_attained n N p (D : 'M[R]_(n, N)) : (0 < p)%N ->
  exists V : 'M[R]_(N, p), (forall j l, V j l = 1 \/ V j l = -1) /\
                           maxentry (D *m V) = infnorm D.
Proof.
case: p => // p _; case: n D => [|n] D.
  exists (const_mx 1); split=> [j l|]; first by rewrite mxE; left.
  by rewrite /maxentry /infnorm !big_ord0.
have [i Hi] := bigmax_attained (rowl1_ge0 D).
exists (@sign_values _ _ p.+1 D i); split=> [j l|].
  by rewrite mxE /sgn1; case: ifP; [left|right].
apply/le_anti; rewrite op_identity_le /=; last by move=> j l; rewrite mxE norm_sgn1.
rewrite /infnorm Hi -(@sign_values_row _ _ p.+1 D i ord0).
apply: le_trans (bigmax_ge _ i); apply: le_trans (bigmax_ge _ ord0).
exact: ler_norm.
Qed.

(* The identity: infnorm D is the maximum of the worst output error over bounded values. *)
Theorem op_identity n N p (D : 'M[R]_(n, N)) : (0 < p)%N ->
  (forall V : 'M[R]_(N, p), (forall j l, `|V j l| <= 1) -> maxentry (D *m V) <= infnorm D) /\
  (exists2 V : 'M[R]_(N, p), (forall j l, `|V j l| <= 1) & maxentry (D *m V) = infnorm D).
Proof.
move=> p0; split=> [V|]; first exact: op_identity_le.
have [V [V1 E]] := op_identity_attained D p0.
by exists V => // j l; case: (V1 j l) => ->; rewrite ?normrN normr1.
Qed.

(* The same for the two attentions of kind attention-distance: delta(A, A') is the worst error of
   the replacement's output A' V against A V over value matrices with entries in [-1, 1]. *)
Corollary attention_output_error n N p (A A' : 'M[R]_(n, N)) : (0 < p)%N ->
  (forall V : 'M[R]_(N, p), (forall j l, `|V j l| <= 1) ->
     maxentry (A *m V - A' *m V) <= infnorm (A - A')) /\
  (exists2 V : 'M[R]_(N, p), (forall j l, `|V j l| <= 1) &
     maxentry (A *m V - A' *m V) = infnorm (A - A')).
Proof.
move=> p0; have [H1 [V V1 E]] := op_identity (A - A') p0.
split=> [W W1|]; first by rewrite -mulmxBl; exact: H1.
by exists V; rewrite // -mulmxBl.
Qed.

End OpIdentity.
