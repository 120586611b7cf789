(* Decode.v — the lower-bound rules: proofs/decode-margin.md and proofs/decode-inverse-norm.md.

   Message rows msg : 'I_M -> 'I_n, a decoder G (N x M) with ||G_j||_1 <= 1 for every row j,
   T_A := A_msg G (M x M).  ||.||_inf on square matrices is infnorm (maximum absolute row sum);
   on column vectors it is infnorm of an M x 1 matrix (max_a |x_a|).
   r_eps(A) >= M is reps_ge A eps M: every B with max_i ||A_i - B_i||_1 <= eps has rank >= M.

   decode-margin
     contraction            (L0)  ||v G||_1 <= ||v||_1
     margin_perturb         row perturbation: margin_a(T + E) >= margin_a(T) - ||E_a||_1
     decode_margin          (L1)  margin_a(T_A) > eps for all a  ==>  r_eps(A) >= M
     decode_margin_rule     the kernel's test: T' any matrix, ||(T_A)_a - T'_a||_1 <= e_a,
                            r_a >= sum_b |T'_ab|, T'_aa + |T'_aa| - r_a - e_a > eps  ==> r_eps(A) >= M
   decode-inverse-norm
     inverse_norm_rank      (L1)  T_A invertible, eps ||T_A^{-1}||_inf < 1  ==>  r_eps(A) >= M
     approx_inverse         (L2)  alpha := ||I - X T||_inf < 1  ==>  T invertible and
                                  ||T^{-1}||_inf <= ||X||_inf / (1 - alpha)   (any X, any T)
     residual_perturb       (L3)  ||I - X T_A|| <= ||I - X T'|| + ||X|| ||T_A - T'||
     inverse_norm_rule      (L4)  the kernel's test (rule_lower.check_inverse_norm): res >= ||I - X T'||,
                                  Xn >= ||X||, ||(T_A)_a - T'_a||_1 <= e, alpha = res + Xn e < 1,
                                  eps Xn / (1 - alpha) < 1  ==>  r_eps(A) >= M
     varah                  (L5)  0 < mu <= margin_a(T) for all a  ==>  T invertible,
                                  ||T^{-1}||_inf <= 1/mu
   The rank argument: B feasible ==> the contraction T_B = B_msg G is injective (hence invertible)
   and M = rank T_B <= rank B.  Everything is over an arbitrary realFieldType; no axiom. *)
From mathcomp Require Import all_ssreflect all_algebra.
From Certkit Require Import Norms OpIdentity.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory Order.Theory.
Open Scope ring_scope.

Section Decode.
Variable R : realFieldType.

(* ---------------------------------------------------------------- vectors and injectivity *)

Definition vnorm M (x : 'cV[R]_M) : R := infnorm x.

Lemma vnorm_entry M (x : 'cV[R]_M) a : `|x a 0| <= vnorm x.
Proof.
apply: le_trans (infnorm_ge x a); rewrite /rowl1 big_ord1.
exact: lexx.
Qed.

Lemma vnorm_eq0 M (x : 'cV[R]_M) : vnorm x <= 0 -> x = 0.
Proof.
move=> h; apply/matrixP => a l; rewrite (ord1 l) mxE; apply/eqP.
by rewrite -normr_le0; exact: le_trans (vnorm_entry x a) h.
Qed.

Lemma infnorm0 m n : infnorm (0 : 'M[R]_(m, n)) = 0.
Proof.
apply/le_anti; rewrite infnorm_ge0 infnorm_le // => i.
by rewrite /rowl1 big1 // => j _; rewrite mxE normr0.
Qed.

Lemma vnorm0 M : vnorm (0 : 'cV[R]_M) = 0.
Proof. exact: infnorm0. Qed.

Lemma inj_unit M (T : 'M[R]_M) : (forall x : 'cV[R]_M, T *m x = 0 -> x = 0) -> T \in unitmx.
Proof.
move=> H; rewrite -unitmx_tr -row_free_unit -kermx_eq0; apply/eqP.
set K := kermx T^T.
have TK : T *m K^T = 0 by rewrite -{1}(trmxK T) -trmx_mul mulmx_ker trmx0.
apply: trmx_inj; rewrite trmx0; apply/matrixP => i j.
have C : K^T *m delta_mx j (0 : 'I_1) = 0 by apply: H; rewrite mulmxA TK mul0mx.
by have := congr1 (fun X : 'cV[R]_M => X i 0) C; rewrite -colE !mxE.
Qed.

Lemma vnormD M (x y : 'cV[R]_M) : vnorm (x + y) <= vnorm x + vnorm y.
Proof. exact: infnormD. Qed.

Lemma vnormN M (x : 'cV[R]_M) : vnorm (- x) = vnorm x.
Proof. exact: infnormN. Qed.

Lemma vnormM M (T : 'M[R]_M) (x : 'cV[R]_M) : vnorm (T *m x) <= infnorm T * vnorm x.
Proof. exact: infnormM. Qed.

Lemma vnorm_ge0 M (x : 'cV[R]_M) : 0 <= vnorm x.
Proof. exact: infnorm_ge0. Qed.

Lemma vnorm_attained M (x : 'cV[R]_M.+1) : exists a, vnorm x = `|x a 0|.
Proof.
have [a Ha] := bigmax_attained (rowl1_ge0 x); exists a.
by rewrite /vnorm /infnorm Ha /rowl1 big_ord1.
Qed.

(* a lower bound c ||x|| <= d ||T x|| (c > 0) makes T invertible, with ||T^{-1}||_inf <= d / c *)
Lemma lower_bound_unit M (T : 'M[R]_M) (c d : R) :
  0 < c -> (forall x : 'cV[R]_M, c * vnorm x <= d * vnorm (T *m x)) -> T \in unitmx.
Proof.
move=> c0 H; apply: inj_unit => x Tx; apply: vnorm_eq0.
by rewrite -(pmulr_rle0 _ c0); apply: le_trans (H x) _; rewrite Tx vnorm0 mulr0.
Qed.

Lemma lower_bound_invnorm M (T : 'M[R]_M) (c d : R) :
  0 < c -> 0 <= d -> (forall x : 'cV[R]_M, c * vnorm x <= d * vnorm (T *m x)) ->
  T \in unitmx /\ infnorm (invmx T) <= d / c.
Proof.
move=> c0 d0 H; have U := lower_bound_unit c0 H; split=> //.
apply: infnorm_le => [|a]; first by rewrite divr_ge0 // ltW.
pose s := @sign_values R M M 1 (invmx T) a.
have s1 : vnorm s <= 1.
  apply: infnorm_le => // b; rewrite /rowl1 big_ord1 mxE norm_sgn1 //.
rewrite -(@sign_values_row R M M 1 (invmx T) a ord0) -/s.
apply: le_trans (ler_norm _) _; apply: le_trans (vnorm_entry _ a) _.
rewrite ler_pdivl_mulr // mulrC; apply: le_trans (H _) _.
by rewrite mulKVmx // -{2}(mulr1 d) ler_wpmul2l.
Qed.

(* ---------------------------------------------------------------- contractions *)

Definition decoder N M (G : 'M[R]_(N, M)) := forall j, rowl1 G j <= 1.

Definition rows n N M (A : 'M[R]_(n, N)) (msg : 'I_M -> 'I_n) : 'M[R]_(M, N) :=
  \matrix_(a, j) A (msg a) j.

Definition contr n N M (A : 'M[R]_(n, N)) (msg : 'I_M -> 'I_n) (G : 'M[R]_(N, M)) : 'M[R]_M :=
  rows A msg *m G.

(* (L0) *)
Lemma contraction m N M (D : 'M[R]_(m, N)) (G : 'M[R]_(N, M)) a :
  decoder G -> rowl1 (D *m G) a <= rowl1 D a.
Proof.
move=> dG; apply: le_trans (rowl1_mul _ _ _) _; apply: ler_sum => j _.
by rewrite -{2}(mulr1 `|D a j|) ler_wpmul2l.
Qed.

Lemma rank_contr n N M (B : 'M[R]_(n, N)) msg (G : 'M[R]_(N, M)) : (\rank (contr B msg G) <= \rank B)%N.
Proof.
pose S : 'M[R]_(M, n) := \matrix_(a, i) (i == msg a)%:R.
rewrite /contr; have -> : rows B msg = S *m B.
  apply/matrixP => a j; rewrite !mxE (bigD1 (msg a)) //= mxE eqxx mul1r big1 ?addr0 //.
  by move=> i /negbTE ne; rewrite mxE ne mul0r.
by apply: leq_trans (mxrankM_maxl _ _) _; exact: mxrankM_maxr.
Qed.

Lemma contr_err n N M (A B : 'M[R]_(n, N)) msg (G : 'M[R]_(N, M)) eps :
  decoder G -> feasible A eps B -> forall a, rowl1 (contr B msg G - contr A msg G) a <= eps.
Proof.
move=> dG FB a; rewrite /contr -mulmxBl; apply: le_trans (contraction _ a dG) _.
apply: le_trans (FB (msg a)); rewrite le_eqVlt; apply/orP; left; apply/eqP.
by apply: eq_bigr => j _; rewrite !mxE distrC.
Qed.

Lemma unit_rank n N M (B : 'M[R]_(n, N)) msg (G : 'M[R]_(N, M)) :
  contr B msg G \in unitmx -> (M <= \rank B)%N.
Proof. by move=> U; rewrite -{1}(mxrank_unit U); exact: rank_contr. Qed.

(* ---------------------------------------------------------------- decode-margin *)

Definition margin M (T : 'M[R]_M) a : R := T a a - \sum_(b | b != a) `|T a b|.

Lemma margin_perturb M (T E : 'M[R]_M) a : margin T a - rowl1 E a <= margin (T + E) a.
Proof.
rewrite /margin /rowl1 [\sum_(j < M) `|E a j|](bigD1 a) //= [(T + E) a a]mxE.
have h1 : \sum_(b | b != a) `|(T + E) a b| <= \sum_(b | b != a) `|T a b| + \sum_(b | b != a) `|E a b|.
  by rewrite -big_split /=; apply: ler_sum => b _; rewrite mxE ler_norm_add.
have h2 : - `|E a a| <= E a a by rewrite ler_oppl -normrN ler_norm.
apply: le_trans (_ : (T a a - `|E a a|) - (\sum_(b | b != a) `|T a b| + \sum_(b | b != a) `|E a b|) <= _).
  by rewrite le_eqVlt; apply/orP; left; apply/eqP; rewrite !opprD !addrA (addrAC (T a a)).
by apply: ler_sub; [rewrite ler_add2l | exact: h1].
Qed.

Lemma margin_lower M (T : 'M[R]_M) (x : 'cV[R]_M) a :
  (forall b, `|x b 0| <= `|x a 0|) -> margin T a * `|x a 0| <= `|(T *m x) a 0|.
Proof.
move=> xa; rewrite mxE (bigD1 a) //= /margin mulrBl mulr_suml.
apply: le_trans (_ : `|T a a * x a 0| - \sum_(b | b != a) `|T a b * x b 0| <= _).
  apply: ler_sub; first by rewrite normrM ler_wpmul2r ?normr_ge0 ?ler_norm.
  by apply: ler_sum => b _; rewrite normrM ler_wpmul2l ?normr_ge0.
apply: le_trans (_ : `|T a a * x a 0| - `|\sum_(b | b != a) T a b * x b 0| <= _).
  by rewrite ler_add2l ler_opp2 ler_norm_sum.
by rewrite -[X in _ <= `|_ + X|]opprK; apply: le_trans _ (ler_sub_dist _ _); rewrite normrN.
Qed.

Lemma margin_unit M (T : 'M[R]_M) : (forall a, 0 < margin T a) -> T \in unitmx.
Proof.
move=> pos; apply: inj_unit => x Tx; case: M T x pos Tx => [|M] T x pos Tx.
  exact: flatmx0.
have [a Ha] := vnorm_attained x; apply: vnorm_eq0; rewrite Ha.
rewrite -(pmulr_rle0 _ (pos a)); apply: le_trans (margin_lower T _) _.
  by move=> b; rewrite -Ha vnorm_entry.
by rewrite Tx mxE normr0.
Qed.

(* (L1) of decode-margin *)
Theorem decode_margin n N M (A : 'M[R]_(n, N)) msg (G : 'M[R]_(N, M)) eps :
  decoder G -> (forall a, eps < margin (contr A msg G) a) -> reps_ge A eps M.
Proof.
move=> dG H B FB; apply: (unit_rank (msg := msg) (G := G)); apply: margin_unit => a.
have -> : contr B msg G = contr A msg G + (contr B msg G - contr A msg G) by rewrite addrC subrK.
apply: lt_le_trans (margin_perturb _ _ _); rewrite subr_gt0.
exact: le_lt_trans (contr_err msg dG FB a) (H a).
Qed.

(* the kernel's test (rule_lower.check_margin): lbs_a = T'_aa + |T'_aa| - r_a - e_a > eps *)
Theorem decode_margin_rule n N M (A : 'M[R]_(n, N)) msg (G : 'M[R]_(N, M)) (T' : 'M[R]_M)
    (e r : 'I_M -> R) eps :
  decoder G ->
  (forall a, rowl1 (contr A msg G - T') a <= e a) ->
  (forall a, \sum_b `|T' a b| <= r a) ->
  (forall a, eps < T' a a + `|T' a a| - r a - e a) ->
  reps_ge A eps M.
Proof.
move=> dG He Hr H; apply: (decode_margin (msg := msg)) dG _ => a.
apply: lt_le_trans (H a) _.
have -> : contr A msg G = T' + (contr A msg G - T') by rewrite addrC subrK.
apply: le_trans (margin_perturb _ _ a); apply: ler_sub (He a).
have := Hr a; rewrite (bigD1 a) //= => h.
by rewrite /margin -addrA ler_add2l ler_subl_addr addrC ler_subr_addr.
Qed.

(* ---------------------------------------------------------------- decode-inverse-norm *)

(* (L5) Varah *)
Theorem varah M (T : 'M[R]_M) (mu : R) :
  0 < mu -> (forall a, mu <= margin T a) -> T \in unitmx /\ infnorm (invmx T) <= 1 / mu.
Proof.
move=> mu0 H; apply: lower_bound_invnorm mu0 ler01 _ => x; rewrite mul1r.
case: M T x H => [|M] T x H; first by rewrite (flatmx0 x) vnorm0 mulr0 vnorm_ge0.
have [a Ha] := vnorm_attained x; rewrite Ha.
apply: le_trans (_ : margin T a * `|x a 0| <= _).
  by rewrite ler_wpmul2r ?normr_ge0.
apply: le_trans (margin_lower _ _) (vnorm_entry _ a).
by move=> b; rewrite -Ha vnorm_entry.
Qed.

(* (L2) an approximate inverse *)
Theorem approx_inverse M (X T : 'M[R]_M) :
  infnorm (1%:M - X *m T) < 1 ->
  T \in unitmx /\ infnorm (invmx T) <= infnorm X / (1 - infnorm (1%:M - X *m T)).
Proof.
set alpha := infnorm _ => a1; apply: lower_bound_invnorm; rewrite ?subr_gt0 ?infnorm_ge0 // => x.
have ex : x = (1%:M - X *m T) *m x + X *m (T *m x) by rewrite mulmxBl mul1mx mulmxA subrK.
rewrite mulrBl mul1r ler_subl_addr; rewrite {1}ex.
apply: le_trans (vnormD _ _) _; rewrite addrC ler_add ?vnormM //.
Qed.

(* (L3) *)
Lemma residual_perturb M (X T T' : 'M[R]_M) :
  infnorm (1%:M - X *m T) <= infnorm (1%:M - X *m T') + infnorm X * infnorm (T - T').
Proof.
have -> : 1%:M - X *m T = (1%:M - X *m T') - X *m (T - T').
  by rewrite mulmxBr opprB addrA subrK.
apply: le_trans (infnormD _ _) _; rewrite infnormN ler_add2l; exact: infnormM.
Qed.

(* (L1) of decode-inverse-norm *)
Theorem inverse_norm_rank n N M (A : 'M[R]_(n, N)) msg (G : 'M[R]_(N, M)) eps :
  0 <= eps -> decoder G -> contr A msg G \in unitmx ->
  eps * infnorm (invmx (contr A msg G)) < 1 -> reps_ge A eps M.
Proof.
set TA := contr A msg G => eps0 dG UA H B FB.
apply: (unit_rank (msg := msg) (G := G)); set TB := contr B msg G.
have E : infnorm (TB - TA) <= eps by apply: infnorm_le => //; exact: contr_err.
apply: (@lower_bound_unit _ _ (1 - eps * infnorm (invmx TA)) (infnorm (invmx TA))).
  by rewrite subr_gt0.
move=> x; rewrite mulrBl mul1r ler_subl_addr.
have ex : x = invmx TA *m (TB *m x - (TB - TA) *m x).
  by rewrite -mulmxBl opprB addrC subrK mulKmx.
rewrite {1}ex; apply: le_trans (vnormM _ _) _.
rewrite -mulrA [eps * (_ * _)]mulrCA -mulrDr ler_wpmul2l ?infnorm_ge0 //.
apply: le_trans (vnormD _ _) _; rewrite vnormN ler_add2l.
by apply: le_trans (vnormM _ _) _; rewrite ler_wpmul2r ?vnorm_ge0.
Qed.

(* (L4) the kernel's test, as rule_lower.check_inverse_norm decides it *)
Theorem inverse_norm_rule n N M (A : 'M[R]_(n, N)) msg (G : 'M[R]_(N, M)) (T' X : 'M[R]_M)
    (e res Xn alpha eps : R) :
  0 <= eps -> decoder G ->
  (forall a, rowl1 (contr A msg G - T') a <= e) ->
  infnorm (1%:M - X *m T') <= res -> infnorm X <= Xn ->
  alpha = res + Xn * e -> alpha < 1 -> eps * (Xn / (1 - alpha)) < 1 ->
  reps_ge A eps M.
Proof.
case: M msg G T' X => [|M] msg G T' X eps0 dG He Hres HXn -> a1 H; first by move=> B _.
set TA := contr A msg G.
have e0 : 0 <= e by apply: le_trans (He ord0); exact: rowl1_ge0.
have Hres' : infnorm (1%:M - X *m TA) <= res + Xn * e.
  apply: le_trans (residual_perturb X TA T') _; apply: ler_add Hres _.
  by apply: ler_pmul => //; [exact: infnorm_ge0 | exact: infnorm_ge0 | exact: infnorm_le].
have a1' := le_lt_trans Hres' a1.
have [UA HA] := approx_inverse a1'.
apply: (inverse_norm_rank (eps0) (dG) (UA)); apply: le_lt_trans H.
rewrite ler_wpmul2l //; apply: le_trans HA _.
apply: ler_pmul => //; first exact: infnorm_ge0.
  by rewrite invr_ge0 subr_ge0 ltW.
by rewrite lef_pinv ?posrE ?subr_gt0 // ler_add2l ler_opp2.
Qed.

End Decode.
