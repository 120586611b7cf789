(* Norms.v — the row-l1 norms used by every certkit rule, over any real (ordered) field.

   rowl1 D i      = ||D_i||_1 = sum_j |D_ij|      (row i of a matrix)
   infnorm D      = max_i ||D_i||_1                (= ||D||_inf, the maximum absolute row sum)
   maxentry Y     = max_i max_l |Y_il|             (= max_i ||Y_i||_inf)
   feasible A e B = forall i, ||A_i - B_i||_1 <= e (B is admissible in the definition of r_e(A))

   All statements are over an arbitrary mathcomp realFieldType R (an ordered field, of which the
   real numbers are one); no axiom is used. *)
From mathcomp Require Import all_ssreflect all_algebra.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory Order.Theory.
Open Scope ring_scope.

Section Norms.
Variable R : realFieldType.

Definition rowl1 m n (D : 'M[R]_(m, n)) (i : 'I_m) : R := \sum_j `|D i j|.

Definition infnorm m n (D : 'M[R]_(m, n)) : R := \big[Num.max/0]_(i < m) rowl1 D i.

Definition maxentry m p (Y : 'M[R]_(m, p)) : R :=
  \big[Num.max/0]_(i < m) \big[Num.max/0]_(l < p) `|Y i l|.

(* The approximation rank r_e(A) = min { rank B : feasible A e B }.  We never need the number
   itself, only the two facts  r_e(A) <= k  <->  exists B, feasible A e B /\ \rank B <= k
   and                         r_e(A) >= M  <->  forall B, feasible A e B -> M <= \rank B. *)
Definition feasible m n (A : 'M[R]_(m, n)) (e : R) (B : 'M[R]_(m, n)) :=
  forall i, rowl1 (A - B) i <= e.

Definition reps_le m n (A : 'M[R]_(m, n)) (e : R) (k : nat) :=
  exists B : 'M[R]_(m, n), feasible A e B /\ (\rank B <= k)%N.

Definition reps_ge m n (A : 'M[R]_(m, n)) (e : R) (M : nat) :=
  forall B : 'M[R]_(m, n), feasible A e B -> (M <= \rank B)%N.

(* ---- a finite maximum of reals, starting from 0 *)

Lemma bigmax_ge0 I (r : seq I) (P : pred I) (F : I -> R) : 0 <= \big[Num.max/0]_(i <- r | P i) F i.
Proof. by elim/big_rec: _ => // i x _ hx; rewrite le_maxr hx orbT. Qed.

Lemma bigmax_ge_seq (I : eqType) (r : seq I) (F : I -> R) i :
  i \in r -> F i <= \big[Num.max/0]_(j <- r) F j.
Proof.
elim: r => // a r IH; rewrite inE big_cons => /orP [/eqP ->|h]; rewrite le_maxr ?lexx //.
by rewrite IH ?orbT.
Qed.

Lemma bigmax_ge (I : finType) (F : I -> R) i : F i <= \big[Num.max/0]_i F i.
Proof. by apply: bigmax_ge_seq; rewrite mem_index_enum. Qed.

Lemma bigmax_le (I : finType) (F : I -> R) c :
  0 <= c -> (forall i, F i <= c) -> \big[Num.max/0]_i F i <= c.
Proof. by move=> c0 Fc; elim/big_ind: _ => // x y hx hy; rewrite le_maxl hx. Qed.


Lemma bigmax_attained_seq (I : eqType) (a : I) (r : seq I) (F : I -> R) :
  (forall i, 0 <= F i) -> exists2 i, i \in a :: r & \big[Num.max/0]_(j <- a :: r) F j = F i.
Proof.
move=> F0; elim: r a => [|b r IH] a.
  by exists a; rewrite ?mem_head // big_cons big_nil (max_idPl (F0 a)).
rewrite big_cons; have [j jr ->] := IH b.
case: (lerP (F a) (F j)) => h.
  by exists j; rewrite // in_cons jr orbT.
by exists a; rewrite ?mem_head.
Qed.

Lemma bigmax_attained n (F : 'I_n.+1 -> R) : (forall i, 0 <= F i) ->
  exists i, \big[Num.max/0]_i F i = F i.
Proof.
move=> F0; rewrite /index_enum /= -enumT.
case E: (enum 'I_n.+1) => [|a r].
  by have := mem_enum 'I_n.+1 ord0; rewrite E.
by have [i _ ->] := bigmax_attained_seq a r F0; exists i.
Qed.

Lemma rowl1_ge0 m n (D : 'M[R]_(m, n)) i : 0 <= rowl1 D i.
Proof. by apply: sumr_ge0 => j _; rewrite normr_ge0. Qed.

Lemma infnorm_ge m n (D : 'M[R]_(m, n)) i : rowl1 D i <= infnorm D.
Proof. exact: bigmax_ge. Qed.

Lemma infnorm_ge0 m n (D : 'M[R]_(m, n)) : 0 <= infnorm D.
Proof. exact: bigmax_ge0. Qed.

Lemma infnorm_le m n (D : 'M[R]_(m, n)) c :
  0 <= c -> (forall i, rowl1 D i <= c) -> infnorm D <= c.
Proof. exact: bigmax_le. Qed.

Lemma infnorm_leP m n (D : 'M[R]_(m, n)) c :
  0 <= c -> (infnorm D <= c <-> forall i, rowl1 D i <= c).
Proof.
move=> c0; split; last exact: infnorm_le.
by move=> h i; exact: le_trans (infnorm_ge D i) h.
Qed.

(* the triangle inequality and the multiplicativity bound of the row-l1 norm *)
Lemma rowl1D m n (D E : 'M[R]_(m, n)) i : rowl1 (D + E) i <= rowl1 D i + rowl1 E i.
Proof.
rewrite /rowl1 -big_split /=; apply: ler_sum => j _.
by rewrite mxE ler_norm_add.
Qed.

Lemma rowl1N m n (D : 'M[R]_(m, n)) i : rowl1 (- D) i = rowl1 D i.
Proof. by apply: eq_bigr => j _; rewrite mxE normrN. Qed.

Lemma rowl1_mul m n p (D : 'M[R]_(m, n)) (E : 'M[R]_(n, p)) i :
  rowl1 (D *m E) i <= \sum_j `|D i j| * rowl1 E j.
Proof.
rewrite /rowl1.
under eq_bigr do rewrite mxE.
apply: le_trans (_ : \sum_(l < p) \sum_(j < n) `|D i j| * `|E j l| <= _).
  by apply: ler_sum => l _; apply: le_trans (ler_norm_sum _ _ _) _;
     apply: ler_sum => j _; rewrite normrM.
by rewrite exchange_big /=; apply: ler_sum => j _; rewrite mulr_sumr.
Qed.

Lemma infnormD m n (D E : 'M[R]_(m, n)) : infnorm (D + E) <= infnorm D + infnorm E.
Proof.
apply: infnorm_le; first by rewrite addr_ge0 ?infnorm_ge0.
by move=> i; apply: le_trans (rowl1D _ _ _) _; rewrite ler_add ?infnorm_ge.
Qed.

Lemma infnormN m n (D : 'M[R]_(m, n)) : infnorm (- D) = infnorm D.
Proof. by apply: eq_bigr => i _; rewrite rowl1N. Qed.

Lemma infnormM m n p (D : 'M[R]_(m, n)) (E : 'M[R]_(n, p)) :
  infnorm (D *m E) <= infnorm D * infnorm E.
Proof.
apply: infnorm_le; first by rewrite mulr_ge0 ?infnorm_ge0.
move=> i; apply: le_trans (rowl1_mul _ _ _) _.
apply: le_trans (_ : \sum_j `|D i j| * infnorm E <= _).
  by apply: ler_sum => j _; rewrite ler_wpmul2l ?normr_ge0 ?infnorm_ge.
by rewrite -mulr_suml ler_wpmul2r ?infnorm_ge0 ?infnorm_ge.
Qed.

End Norms.
