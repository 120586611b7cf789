(* FpSum.v — proofs/fp-rounding.md Lemma b (the gamma_n summation bound) and Lemma b' as sum_up uses
   it, in binary64 with round to nearest (Flocq).

   The format is Flocq's FLT_exp (-1074) 53: the binary64 numbers with gradual underflow and an
   unbounded exponent range, i.e. IEEE binary64 when no operation overflows (the kernel rejects
   every non-finite result it relies on, fp-rounding preamble).  Rounding is round to nearest
   with ANY tie-breaking rule `choice` (ties-to-even is one), u = 2^-53, gamma_n = n u / (1 - n u).

   A summation "in any order" is a binary tree with the N terms (floats) at its leaves and a
   rounded addition at each of its N - 1 internal nodes (recursive, pairwise, blocked and SIMD
   summation are such trees; numpy's np.sum is pairwise).

   sum_error          |fl(sum) - sum_i x_i| <= gamma_{N-1} sum_i |x_i|         (any tree; (N-1)u < 1)
   rec_sum_error      the same for recursive summation s_1 = x_1, s_k = fl(s_{k-1} + x_k)
   sum_nonneg_up      x_i >= 0, gamma_{N-1} <= g <= 1/2  ==>  sum_i x_i <= (1 + 2 g) fl(sum)
                      (fp.sum_up multiplies np.sum by 1 + 2 gamma(N), gamma(N) >= gamma_N >= gamma_{N-1};
                      the rounding of that product and of the final inflate are fp-rounding (e'), prose) *)
From Coq Require Import Reals Psatz List.
From Flocq Require Import Core Plus_error Relative.

Open Scope R_scope.

Section FpSum.

Definition emin : Z := (-1074)%Z.
Definition prec : Z := 53%Z.
Definition fexp := FLT_exp emin prec.
Definition fmt (x : R) : Prop := generic_format radix2 fexp x.

Variable choice : Z -> bool.
Definition rnd (x : R) : R := round radix2 fexp (Znearest choice) x.

Definition u : R := bpow radix2 (-53).
Definition gamma (n : nat) : R := INR n * u / (1 - INR n * u).

Lemma u_pos : 0 < u.
Proof. apply bpow_gt_0. Qed.

Lemma u_ro_eq : u_ro radix2 prec = u.
Proof.
unfold u_ro, u, prec.
replace (- (53) + 1)%Z with (1 + -53)%Z by lia.
rewrite bpow_plus, bpow_1; simpl (IZR (radix_val radix2)); lra.
Qed.

Instance prec_gt_0 : Prec_gt_0 prec.
Proof. unfold Prec_gt_0, prec; lia. Qed.

(* one rounded addition of two floats: a relative error only (no underflow term) *)
Lemma add_rel (x y : R) : fmt x -> fmt y ->
  exists d, Rabs d <= u /\ rnd (x + y) = (x + y) * (1 + d).
Proof.
intros Fx Fy.
destruct (FLT_plus_error_N_ex radix2 emin prec choice x y Fx Fy) as [d [Hd E]].
exists d; split; [| exact E].
rewrite <- u_ro_eq; apply Rle_trans with (1 := Hd).
apply u_rod1pu_ro_le_u_ro.
Qed.

(* ---- gamma *)

Lemma gamma_0 : gamma 0 = 0.
Proof. unfold gamma; simpl; field; lra. Qed.

Lemma gamma_ge0 n : INR n * u < 1 -> 0 <= gamma n.
Proof.
intros H; unfold gamma; apply Rmult_le_pos.
- apply Rmult_le_pos; [apply pos_INR | apply Rlt_le, u_pos].
- apply Rlt_le, Rinv_0_lt_compat; lra.
Qed.

Lemma gamma_mono m n : (m <= n)%nat -> INR n * u < 1 -> gamma m <= gamma n.
Proof.
intros Hmn Hn; unfold gamma.
assert (Hu := u_pos).
assert (Hle : INR m * u <= INR n * u) by (apply Rmult_le_compat_r; [lra | apply le_INR; exact Hmn]).
assert (H0 : 0 <= INR m * u) by (apply Rmult_le_pos; [apply pos_INR | lra]).
apply Rmult_le_compat; [exact H0 | | exact Hle | ].
- apply Rlt_le, Rinv_0_lt_compat; lra.
- apply Rinv_le_contravar; lra.
Qed.

(* gamma_k + u (1 + gamma_k) <= gamma_{k+1} *)
Lemma gamma_step k : INR (S k) * u < 1 -> gamma k + u * (1 + gamma k) <= gamma (S k).
Proof.
intros H; unfold gamma; rewrite S_INR in H |- *.
assert (Hu := u_pos); assert (Hk := pos_INR k).
set (a := INR k * u) in *.
assert (Ha : 0 <= a) by (unfold a; apply Rmult_le_pos; lra).
replace ((INR k + 1) * u) with (a + u) in * by (unfold a; ring).
replace (a / (1 - a) + u * (1 + a / (1 - a))) with ((a + u) / (1 - a)) by (field; lra).
apply Rmult_le_compat_l; [lra |].
apply Rinv_le_contravar; lra.
Qed.

(* ---- summation trees *)

Inductive tree : Type := Leaf (x : R) | Node (l r : tree).

Fixpoint leaves (t : tree) : nat :=
  match t with Leaf _ => 1%nat | Node l r => (leaves l + leaves r)%nat end.
Fixpoint exact (t : tree) : R :=
  match t with Leaf x => x | Node l r => exact l + exact r end.
Fixpoint abs_sum (t : tree) : R :=
  match t with Leaf x => Rabs x | Node l r => abs_sum l + abs_sum r end.
Fixpoint fl_sum (t : tree) : R :=
  match t with Leaf x => x | Node l r => rnd (fl_sum l + fl_sum r) end.
Fixpoint floats (t : tree) : Prop :=
  match t with Leaf x => fmt x | Node l r => floats l /\ floats r end.

Lemma leaves_pos t : (1 <= leaves t)%nat.
Proof. induction t; simpl; lia. Qed.

Lemma fl_sum_fmt t : floats t -> fmt (fl_sum t).
Proof.
destruct t as [x | l r]; simpl; [easy | intros _].
unfold fmt, rnd, fexp; apply generic_format_round; auto with typeclass_instances.
Qed.

Lemma exact_le_abs t : Rabs (exact t) <= abs_sum t.
Proof.
induction t; simpl; [lra |].
apply Rle_trans with (1 := Rabs_triang _ _); lra.
Qed.

(* Lemma b of fp-rounding *)
Theorem sum_error t :
  floats t -> INR (leaves t - 1) * u < 1 ->
  Rabs (fl_sum t - exact t) <= gamma (leaves t - 1) * abs_sum t.
Proof.
assert (Hu := u_pos).
induction t as [x | l IHl r IHr]; simpl; intros Ft Hn.
- replace (x - x) with 0 by ring; rewrite Rabs_R0.
  replace (1 - 1)%nat with 0%nat by lia; rewrite gamma_0; lra.
- destruct Ft as [Fl Fr].
  assert (pl := leaves_pos l); assert (pr := leaves_pos r).
  set (p := leaves l) in *; set (q := leaves r) in *.
  assert (Hp : INR p * u < 1).
  { apply Rle_lt_trans with (2 := Hn), Rmult_le_compat_r; [lra | apply le_INR; lia]. }
  assert (Hq : INR q * u < 1).
  { apply Rle_lt_trans with (2 := Hn), Rmult_le_compat_r; [lra | apply le_INR; lia]. }
  assert (Hp1 : INR (p - 1) * u < 1).
  { apply Rle_lt_trans with (2 := Hp), Rmult_le_compat_r; [lra | apply le_INR; lia]. }
  assert (Hq1 : INR (q - 1) * u < 1).
  { apply Rle_lt_trans with (2 := Hq), Rmult_le_compat_r; [lra | apply le_INR; lia]. }
  specialize (IHl Fl Hp1); specialize (IHr Fr Hq1).
  destruct (add_rel _ _ (fl_sum_fmt l Fl) (fl_sum_fmt r Fr)) as [d [Hd E]].
  rewrite E.
  set (sl := fl_sum l) in *; set (sr := fl_sum r) in *.
  set (xl := exact l) in *; set (xr := exact r) in *.
  set (al := abs_sum l) in *; set (ar := abs_sum r) in *.
  set (gl := gamma (p - 1)) in *; set (gr := gamma (q - 1)) in *.
  assert (gl0 : 0 <= gl) by (apply gamma_ge0; exact Hp1).
  assert (gr0 : 0 <= gr) by (apply gamma_ge0; exact Hq1).
  assert (Bl : Rabs xl <= al) by apply exact_le_abs.
  assert (Br : Rabs xr <= ar) by apply exact_le_abs.
  (* |s| <= (1 + g) a on each side *)
  assert (Sl : Rabs sl <= (1 + gl) * al).
  { replace sl with (xl + (sl - xl)) by ring.
    apply Rle_trans with (1 := Rabs_triang _ _); lra. }
  assert (Sr : Rabs sr <= (1 + gr) * ar).
  { replace sr with (xr + (sr - xr)) by ring.
    apply Rle_trans with (1 := Rabs_triang _ _); lra. }
  (* the step lemma on each side: gamma_{p-1} + u (1 + gamma_{p-1}) <= gamma_p <= gamma_{p+q-1} *)
  assert (Gl : gl + u * (1 + gl) <= gamma (p + q - 1)).
  { apply Rle_trans with (gamma p).
    - assert (Hs := gamma_step (p - 1)); replace (S (p - 1)) with p in Hs by lia.
      apply Hs, Hp.
    - apply gamma_mono; [lia | exact Hn]. }
  assert (Gr : gr + u * (1 + gr) <= gamma (p + q - 1)).
  { apply Rle_trans with (gamma q).
    - assert (Hs := gamma_step (q - 1)); replace (S (q - 1)) with q in Hs by lia.
      apply Hs, Hq.
    - apply gamma_mono; [lia | exact Hn]. }
  replace ((sl + sr) * (1 + d) - (xl + xr)) with ((sl - xl) + (sr - xr) + d * (sl + sr)) by ring.
  apply Rle_trans with (Rabs (sl - xl) + Rabs (sr - xr) + u * (Rabs sl + Rabs sr)).
  { apply Rle_trans with (1 := Rabs_triang _ _), Rplus_le_compat.
    - apply Rabs_triang.
    - rewrite Rabs_mult; apply Rmult_le_compat; try apply Rabs_pos; [exact Hd | apply Rabs_triang]. }
  assert (al0 : 0 <= al) by (apply Rle_trans with (2 := Bl), Rabs_pos).
  assert (ar0 : 0 <= ar) by (apply Rle_trans with (2 := Br), Rabs_pos).
  apply Rle_trans with ((gl + u * (1 + gl)) * al + (gr + u * (1 + gr)) * ar).
  { assert (u * Rabs sl <= u * ((1 + gl) * al)) by (apply Rmult_le_compat_l; lra).
    assert (u * Rabs sr <= u * ((1 + gr) * ar)) by (apply Rmult_le_compat_l; lra).
    nra. }
  assert ((gl + u * (1 + gl)) * al <= gamma (p + q - 1) * al) by (apply Rmult_le_compat_r; assumption).
  assert ((gr + u * (1 + gr)) * ar <= gamma (p + q - 1) * ar) by (apply Rmult_le_compat_r; assumption).
  lra.
Qed.

(* Recursive summation s_1 = x_1, s_k = fl(s_{k-1} + x_k), as a (left comb) tree *)
Fixpoint rec_fl (s : R) (xs : list R) : R :=
  match xs with nil => s | y :: ys => rec_fl (rnd (s + y)) ys end.

Fixpoint comb (acc : tree) (xs : list R) : tree :=
  match xs with nil => acc | y :: ys => comb (Node acc (Leaf y)) ys end.

Definition sumR (xs : list R) : R := fold_right Rplus 0 xs.

Lemma comb_fl acc xs : fl_sum (comb acc xs) = rec_fl (fl_sum acc) xs.
Proof. revert acc; induction xs as [| y ys IH]; intros acc; [reflexivity | apply IH]. Qed.

Lemma comb_exact acc xs : exact (comb acc xs) = exact acc + sumR xs.
Proof.
revert acc; induction xs as [| y ys IH]; intros acc; simpl; [ring |].
rewrite IH; simpl; ring.
Qed.

Lemma comb_abs acc xs : abs_sum (comb acc xs) = abs_sum acc + sumR (map Rabs xs).
Proof.
revert acc; induction xs as [| y ys IH]; intros acc; simpl; [ring |].
rewrite IH; simpl; ring.
Qed.

Lemma comb_leaves acc xs : leaves (comb acc xs) = (leaves acc + length xs)%nat.
Proof.
revert acc; induction xs as [| y ys IH]; intros acc; simpl; [lia |].
rewrite IH; simpl; lia.
Qed.

Lemma comb_floats acc xs : floats acc -> Forall fmt xs -> floats (comb acc xs).
Proof.
revert acc; induction xs as [| y ys IH]; intros acc Fa Fx; simpl; [exact Fa |].
inversion Fx; subst; apply IH; [split | ]; assumption.
Qed.

(* recursive summation of the N = 1 + length xs floats x0, xs: gamma_{N-1} = gamma (length xs) *)
Theorem rec_sum_error (x0 : R) (xs : list R) :
  fmt x0 -> Forall fmt xs -> INR (length xs) * u < 1 ->
  Rabs (rec_fl x0 xs - (x0 + sumR xs)) <= gamma (length xs) * (Rabs x0 + sumR (map Rabs xs)).
Proof.
intros F0 Fx Hn.
assert (E := sum_error (comb (Leaf x0) xs)).
rewrite comb_fl, comb_exact, comb_abs, comb_leaves in E; simpl in E.
rewrite Nat.sub_0_r in E.
apply E; [apply comb_floats; [exact F0 | exact Fx] | exact Hn].
Qed.

(* Lemma b' as fp.sum_up uses it: non-negative terms, any tree *)
Fixpoint nonneg (t : tree) : Prop :=
  match t with Leaf x => 0 <= x | Node l r => nonneg l /\ nonneg r end.

Lemma abs_sum_nonneg t : nonneg t -> abs_sum t = exact t.
Proof.
induction t as [x | l IHl r IHr]; cbn [abs_sum exact nonneg]; intros H.
- apply Rabs_pos_eq, H.
- destruct H; rewrite IHl, IHr; auto.
Qed.

Theorem sum_nonneg_up t (g : R) :
  floats t -> nonneg t -> INR (leaves t - 1) * u < 1 ->
  gamma (leaves t - 1) <= g -> g <= /2 ->
  exact t <= (1 + 2 * g) * fl_sum t.
Proof.
intros Ft Nt Hn Hg Hg2.
assert (E := sum_error t Ft Hn); rewrite abs_sum_nonneg in E by exact Nt.
assert (g0 := gamma_ge0 _ Hn).
assert (S0 : 0 <= exact t) by (rewrite <- abs_sum_nonneg by exact Nt;
  clear; induction t; cbn [abs_sum]; [apply Rabs_pos | lra]).
set (S := exact t) in *; set (F := fl_sum t) in *; set (G := gamma (leaves t - 1)) in *.
assert (HF : S - G * S <= F) by (apply Rabs_le_inv in E; lra).
assert (GS : G * S <= g * S) by (apply Rmult_le_compat_r; lra).
assert (HF' : (1 - g) * S <= F) by lra.
(* S <= (1 + 2g)(1 - g) S <= (1 + 2g) F *)
assert (g * (1 - 2 * g) * S >= 0) by (apply Rle_ge, Rmult_le_pos; [apply Rmult_le_pos|]; lra).
assert ((1 + 2 * g) * ((1 - g) * S) <= (1 + 2 * g) * F) by (apply Rmult_le_compat_l; lra).
nra.
Qed.

End FpSum.
