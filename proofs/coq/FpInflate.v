(* FpInflate.v — proofs/fp-rounding.md (e)/(e'): the upward inflation `fp.inflate(x, m) =
   fl(fl(x * (1 + 2^-40)) + fl(m * 2^-800))` (TINY = 2^-800), in two machine-checked steps.

   A formula over non-negative floats with +, * and division by positive floats c, evaluated with
   every operation rounded to nearest in binary64 (Flocq's FLT_exp (-1074) 53, no overflow):

   formula_bound   (step (2) of the note's proof, no hypothesis): for every formula v,
                       0 <= x_v <= (1-u)^{-n_v} (x^_v + a_v)
                   where x_v is the exact value, x^_v the float evaluation, n_v the number of
                   operations of the formula written as a tree, and a_v the accumulated underflow
                   slack: a = 0 at inputs, a_p + a_q at +, eta/2 + a_p x^_q + a_q x^_p + a_p a_q at *,
                   eta/2 + a_p / c at / c  (eta = 2^-1074).
   inflate_final   (steps (4)-(5), the kernel's outer two roundings): if x <= (1-u)^{-n} (x^ + a)
                   with n <= m <= 2^11, 1 <= m and a <= m 2^-814, then
                       x <= fl( fl(x^ * (1 + 2^-40)) + fl(m * 2^-800) ).
   inflate_sound   the two together: a formula with at most m operations whose slack a_v is at most
                   m 2^-814 is bounded by inflate(x^, m).

   Not machine-checked (prose, fp-rounding (e')): that the kernel's hypothesis (H') — the multipliers
   applied after a possible underflow multiply to at most 2^260 — gives a_v <= m 2^-814 for the
   formulas the kernel inflates, and that those formulas are of this form. *)
From Coq Require Import Reals Psatz.
From Flocq Require Import Core Plus_error Relative.
From Certkit Require Import FpSum.

Open Scope R_scope.

Section FpInflate.
Variable choice : Z -> bool.
Notation rnd := (FpSum.rnd choice).

Definition eta : R := bpow radix2 (-1074).

Lemma eta_pos : 0 < eta.
Proof. apply bpow_gt_0. Qed.

(* any real: round(z) = z (1 + d) + e, |d| <= u, |e| <= eta/2 *)
Lemma rnd_model z : exists d e, Rabs d <= u /\ Rabs e <= eta / 2 /\ rnd z = z * (1 + d) + e.
Proof.
destruct (error_N_FLT radix2 emin prec ltac:(unfold prec; lia) choice z) as [d [e [Hd [He [_ E]]]]].
exists d, e; split; [| split; [| exact E]].
- apply Rle_trans with (1 := Hd); rewrite <- u_ro_eq; unfold u_ro; lra.
- apply Rle_trans with (1 := He); unfold eta, emin; lra.
Qed.

Lemma u_small : u <= / 1024.
Proof.
unfold u; apply Rle_trans with (bpow radix2 (-10)); [apply bpow_le; lia |].
simpl; lra.
Qed.

(* a non-negative z is at most (fl(z) + eta/2)/(1-u), and fl(z) >= 0 *)
Lemma rnd_up z : 0 <= z -> z * (1 - u) <= rnd z + eta / 2.
Proof.
intros z0; destruct (rnd_model z) as [d [e [Hd [He E]]]]; rewrite E.
apply Rabs_le_inv in Hd; apply Rabs_le_inv in He.
assert (z * d >= - (z * u)) by nra. nra.
Qed.

Lemma rnd_ge0 z : 0 <= z -> 0 <= rnd z.
Proof.
intros z0; unfold FpSum.rnd, fexp; rewrite <- (round_0 radix2 (FLT_exp emin prec) (Znearest choice)).
apply round_le; auto with typeclass_instances; apply FLT_exp_valid, prec_gt_0.
Qed.

(* additions of two floats: no absolute term *)
Lemma rnd_add_up x y : fmt x -> fmt y -> 0 <= x + y -> (x + y) * (1 - u) <= rnd (x + y).
Proof.
intros Fx Fy s0; destruct (add_rel choice x y Fx Fy) as [d [Hd E]]; rewrite E.
apply Rabs_le_inv in Hd; nra.
Qed.

Inductive expr : Type :=
  | Inp (x : R)
  | Add (p q : expr)
  | Mul (p q : expr)
  | Divc (p : expr) (c : R).

Fixpoint ex (v : expr) : R :=
  match v with Inp x => x | Add p q => ex p + ex q | Mul p q => ex p * ex q | Divc p c => ex p / c end.
Fixpoint fl (v : expr) : R :=
  match v with
  | Inp x => x | Add p q => rnd (fl p + fl q) | Mul p q => rnd (fl p * fl q) | Divc p c => rnd (fl p / c)
  end.
Fixpoint ops (v : expr) : nat :=
  match v with Inp _ => 0 | Add p q | Mul p q => S (ops p + ops q) | Divc p _ => S (ops p) end.
Fixpoint slack (v : expr) : R :=
  match v with
  | Inp _ => 0
  | Add p q => slack p + slack q
  | Mul p q => eta / 2 + slack p * fl q + slack q * fl p + slack p * slack q
  | Divc p c => eta / 2 + slack p / c
  end.
Fixpoint wf (v : expr) : Prop :=
  match v with
  | Inp x => fmt x /\ 0 <= x
  | Add p q | Mul p q => wf p /\ wf q
  | Divc p c => wf p /\ 0 < c
  end.

Lemma fl_fmt v : wf v -> fmt (fl v).
Proof.
destruct v; simpl; [tauto | ..]; intros _; unfold fmt, FpSum.rnd, fexp;
  apply generic_format_round; auto with typeclass_instances; apply FLT_exp_valid, prec_gt_0.
Qed.

Definition K (n : nat) : R := / (1 - u) ^ n.

Lemma K_ge1 n : 1 <= K n.
Proof.
assert (Hu := u_pos); assert (Hs := u_small).
unfold K; apply Rle_trans with (/ 1); [rewrite Rinv_1; lra | apply Rinv_le_contravar].
- apply pow_lt; lra.
- rewrite <- (pow1 n) at 2; apply pow_incr; split; lra.
Qed.

Lemma K_S n : K (S n) = K n / (1 - u).
Proof.
assert (Hu := u_pos); assert (Hs := u_small).
unfold K; simpl; rewrite Rinv_mult; unfold Rdiv; ring.
Qed.

Lemma K_add m n : K (m + n) = K m * K n.
Proof.
assert (Hu := u_pos); assert (Hs := u_small).
unfold K; rewrite pow_add, Rinv_mult; reflexivity.
Qed.

Lemma K_mono m n : (m <= n)%nat -> K m <= K n.
Proof.
intros H; replace n with (m + (n - m))%nat by lia; rewrite K_add.
assert (H1 := K_ge1 m); assert (H2 := K_ge1 (n - m)); nra.
Qed.

Theorem formula_bound v :
  wf v ->
  0 <= ex v /\ 0 <= fl v /\ 0 <= slack v /\ ex v <= K (ops v) * (fl v + slack v).
Proof.
assert (Hu := u_pos); assert (Hs := u_small); assert (He := eta_pos).
assert (Ku : forall n w, 0 <= w -> K n * w <= K (S n) * ((1 - u) * w)).
{ intros n w w0; rewrite K_S; apply Req_le; field; lra. }
induction v as [x | p IHp q IHq | p IHp q IHq | p IHp c]; simpl; intros W.
- destruct W as [_ x0]; unfold K; simpl; rewrite Rinv_1; lra.
- destruct W as [Wp Wq]; destruct (IHp Wp) as [e0 [f0 [s0 Bp]]]; destruct (IHq Wq) as [e0' [f0' [s0' Bq]]].
  assert (R0 := rnd_add_up _ _ (fl_fmt p Wp) (fl_fmt q Wq) ltac:(lra)).
  assert (Kp := K_mono (ops p) (ops p + ops q) ltac:(lia)).
  assert (Kq := K_mono (ops q) (ops p + ops q) ltac:(lia)).
  assert (K1 := K_ge1 (ops p + ops q)).
  split; [lra | split; [apply rnd_ge0; lra | split; [lra |]]].
  apply Rle_trans with (K (ops p + ops q) * (fl p + fl q + (slack p + slack q))).
  { assert (K (ops p) * (fl p + slack p) <= K (ops p + ops q) * (fl p + slack p)) by
      (apply Rmult_le_compat_r; lra).
    assert (K (ops q) * (fl q + slack q) <= K (ops p + ops q) * (fl q + slack q)) by
      (apply Rmult_le_compat_r; lra).
    lra. }
  apply Rle_trans with (1 := Ku (ops p + ops q)%nat (fl p + fl q + (slack p + slack q)) ltac:(lra)).
  apply Rmult_le_compat_l; [apply Rle_trans with 1; [lra | apply K_ge1] |].
  assert (0 <= u * (slack p + slack q)) by (apply Rmult_le_pos; lra).
  nra.
- destruct W as [Wp Wq]; destruct (IHp Wp) as [e0 [f0 [s0 Bp]]]; destruct (IHq Wq) as [e0' [f0' [s0' Bq]]].
  assert (R0 := rnd_up (fl p * fl q) ltac:(nra)).
  assert (Kp := K_ge1 (ops p)); assert (Kq := K_ge1 (ops q)).
  split; [nra | split; [apply rnd_ge0; nra | split; [nra |]]].
  apply Rle_trans with (K (ops p + ops q) * ((fl p + slack p) * (fl q + slack q))).
  { rewrite K_add.
    replace (K (ops p) * K (ops q) * ((fl p + slack p) * (fl q + slack q)))
      with ((K (ops p) * (fl p + slack p)) * (K (ops q) * (fl q + slack q))) by ring.
    apply Rmult_le_compat; assumption. }
  apply Rle_trans with (1 := Ku (ops p + ops q)%nat ((fl p + slack p) * (fl q + slack q)) ltac:(nra)).
  apply Rmult_le_compat_l; [apply Rle_trans with 1; [lra | apply K_ge1] |].
  assert (0 <= u * (slack p * fl q + slack q * fl p + slack p * slack q)) by
    (apply Rmult_le_pos; [lra | nra]).
  nra.
- destruct W as [Wp c0]; destruct (IHp Wp) as [e0 [f0 [s0 Bp]]].
  assert (R0 := rnd_up (fl p / c) ltac:(unfold Rdiv; apply Rmult_le_pos; [lra | apply Rlt_le, Rinv_0_lt_compat; lra])).
  assert (Kp := K_ge1 (ops p)).
  assert (ic : 0 < / c) by (apply Rinv_0_lt_compat; lra).
  unfold Rdiv in *.
  split; [nra | split; [apply rnd_ge0; nra | split; [nra |]]].
  apply Rle_trans with (K (ops p) * ((fl p + slack p) * / c)).
  { replace (K (ops p) * ((fl p + slack p) * / c)) with ((K (ops p) * (fl p + slack p)) * / c) by ring.
    apply Rmult_le_compat_r; lra. }
  apply Rle_trans with (1 := Ku (ops p) ((fl p + slack p) * / c) ltac:(nra)).
  apply Rmult_le_compat_l; [apply Rle_trans with 1; [lra | apply K_ge1] |].
  assert (0 <= u * (slack p * / c)) by (apply Rmult_le_pos; nra).
  nra.
Qed.

(* ---- the outer roundings of fp.inflate *)

Lemma bernoulli (m : nat) : (1 - u) ^ m >= 1 - INR m * u.
Proof.
assert (Hu := u_pos); assert (Hs := u_small).
induction m as [| m IH]; [simpl; lra |].
rewrite S_INR; change ((1 - u) ^ S m) with ((1 - u) * (1 - u) ^ m).
assert ((1 - u) * (1 - u) ^ m >= (1 - u) * (1 - INR m * u)) by (apply Rmult_ge_compat_l; lra).
assert (0 <= INR m * u * u) by (apply Rmult_le_pos; [apply Rmult_le_pos; [apply pos_INR | lra] | lra]).
nra.
Qed.

Definition v40 : R := bpow radix2 (-40).
Definition tiny : R := bpow radix2 (-800).

Lemma K_2048 n : (n <= 2048)%nat -> K n <= 1 + v40 / 2.
Proof.
assert (Hu := u_pos); assert (Hs := u_small).
assert (V : v40 = bpow radix2 (-40)) by reflexivity.
assert (P13 : bpow radix2 (-13) = / 8192) by (simpl; unfold Z.pow_pos; simpl; lra).
assert (U13 : u = v40 * / 8192) by (rewrite <- P13, V; unfold u; rewrite <- bpow_plus; reflexivity).
assert (P40 : v40 <= / 1024) by (rewrite V; apply Rle_trans with (bpow radix2 (-10));
  [apply bpow_le; lia | simpl; unfold Z.pow_pos; simpl; lra]).
assert (v0 : 0 < v40) by (rewrite V; apply bpow_gt_0).
assert (I2048 : INR 2048 = 2048) by (rewrite INR_IZR_INZ; reflexivity).
intros H; unfold K; assert (B := bernoulli n).
assert (Hn : INR n * u <= 2048 * u) by (apply Rmult_le_compat_r; [lra | rewrite <- I2048; apply le_INR, H]).
assert (P0 : 0 < (1 - u) ^ n) by (apply pow_lt; lra).
set (P := (1 - u) ^ n) in *; clearbody P; rewrite U13 in B, Hn.
apply Rle_trans with (/ (1 - v40 / 4)); [apply Rinv_le_contravar; lra |].
apply (Rmult_le_reg_r (1 - v40 / 4)); [lra |].
rewrite Rinv_l by lra.
nra.
Qed.

Theorem inflate_final (x xh a : R) (n m : nat) :
  fmt xh -> 0 <= xh -> 0 <= a ->
  (n <= m)%nat -> (1 <= m)%nat -> (m <= 2048)%nat ->
  a <= INR m * bpow radix2 (-814) ->
  x <= K n * (xh + a) ->
  x <= rnd (rnd (xh * (1 + v40)) + rnd (INR m * tiny)).
Proof.
intros Fx x0 a0 Hnm Hm1 Hm Ha Hx.
assert (Hu := u_pos); assert (Hs := u_small); assert (He := eta_pos).
assert (V : v40 = bpow radix2 (-40)) by reflexivity.
assert (v0 : 0 < v40) by (rewrite V; apply bpow_gt_0).
assert (P40 : v40 <= / 1024) by (rewrite V; apply Rle_trans with (bpow radix2 (-10));
  [apply bpow_le; lia | simpl; unfold Z.pow_pos; simpl; lra]).
assert (U13 : u = v40 * / 8192).
{ assert (P13 : bpow radix2 (-13) = / 8192) by (simpl; unfold Z.pow_pos; simpl; lra).
  rewrite <- P13, V; unfold u; rewrite <- bpow_plus; reflexivity. }
assert (t0 : 0 < tiny) by apply bpow_gt_0.
assert (T14 : bpow radix2 (-814) = tiny * / 16384).
{ assert (P14 : bpow radix2 (-14) = / 16384) by (simpl; unfold Z.pow_pos; simpl; lra).
  rewrite <- P14; unfold tiny; rewrite <- bpow_plus; reflexivity. }
assert (Eta : eta <= tiny * / 16384).
{ rewrite <- T14; unfold eta; apply bpow_le; lia. }
assert (M1 : 1 <= INR m) by (apply (le_INR 1); exact Hm1).
(* x <= (1 + v/2)(xh + a) *)
assert (Kn := K_2048 n ltac:(lia)).
assert (Hx' : x <= (1 + v40 / 2) * (xh + a)).
{ apply Rle_trans with (1 := Hx), Rmult_le_compat_r; lra. }
(* the two inner roundings and the outer addition *)
set (y1 := rnd (xh * (1 + v40))); set (y2 := rnd (INR m * tiny)).
assert (Y1 : xh * (1 + v40) * (1 - u) <= y1 + eta / 2) by (apply rnd_up; nra).
assert (Y2 : INR m * tiny * (1 - u) <= y2 + eta / 2) by (apply rnd_up; nra).
assert (y10 : 0 <= y1) by (apply rnd_ge0; nra).
assert (y20 : 0 <= y2) by (apply rnd_ge0; nra).
assert (F1 : fmt y1) by (unfold y1, fmt, FpSum.rnd, fexp; apply generic_format_round;
  auto with typeclass_instances; apply FLT_exp_valid, prec_gt_0).
assert (F2 : fmt y2) by (unfold y2, fmt, FpSum.rnd, fexp; apply generic_format_round;
  auto with typeclass_instances; apply FLT_exp_valid, prec_gt_0).
assert (Y : (y1 + y2) * (1 - u) <= rnd (y1 + y2)) by (apply rnd_add_up; auto; lra).
apply Rle_trans with (1 := Hx'); apply Rle_trans with (2 := Y).
(* (1 + v/2)(xh + a) <= (1-u) (y1 + y2) *)
rewrite U13 in *.
set (w := 1 - v40 * / 8192) in *.
assert (w1 : w <= 1) by (unfold w; lra).
assert (w2 : / 2 <= w) by (unfold w; lra).
assert (MT : 0 <= INR m * tiny) by (apply Rmult_le_pos; lra).
assert (S1 : (xh * (1 + v40) * w + INR m * tiny * w - eta) * w <= (y1 + y2) * w).
{ apply Rmult_le_compat_r; lra. }
assert (XH : (1 + v40 / 2) * xh <= xh * (1 + v40) * w * w).
{ assert (0 <= xh * v40 * v40) by (apply Rmult_le_pos; [apply Rmult_le_pos |]; lra).
  unfold w; nra. }
assert (MW : INR m * tiny * / 4 <= INR m * tiny * (w * w)).
{ apply Rmult_le_compat_l; [exact MT | nra]. }
assert (EW : eta * w <= eta) by (assert (0 <= eta * (1 - w)) by (apply Rmult_le_pos; lra); nra).
assert (AM : (1 + v40 / 2) * a <= 2 * (INR m * tiny) * / 16384).
{ apply Rle_trans with ((1 + v40 / 2) * (INR m * (tiny * / 16384))).
  - apply Rmult_le_compat_l; [lra | rewrite <- T14; exact Ha].
  - assert (0 <= INR m * tiny * v40) by (apply Rmult_le_pos; lra). nra. }
assert (ET : eta <= INR m * tiny * / 16384).
{ apply Rle_trans with (1 := Eta); assert (0 <= (INR m - 1) * tiny) by (apply Rmult_le_pos; lra). nra. }
assert (EQ : (xh * (1 + v40) * w + INR m * tiny * w - eta) * w
             = xh * (1 + v40) * w * w + INR m * tiny * (w * w) - eta * w) by ring.
rewrite EQ in S1.
lra.
Qed.

(* Lemma (e') for a formula: with slack at most m 2^-814, inflate(fl v, m) is an upper bound *)
Theorem inflate_sound (v : expr) (m : nat) :
  wf v -> (ops v <= m)%nat -> (1 <= m)%nat -> (m <= 2048)%nat ->
  slack v <= INR m * bpow radix2 (-814) ->
  ex v <= rnd (rnd (fl v * (1 + v40)) + rnd (INR m * tiny)).
Proof.
intros W Hn Hm1 Hm Ha.
destruct (formula_bound v W) as [_ [f0 [s0 B]]].
exact (inflate_final _ _ _ (ops v) m (fl_fmt v W) f0 s0 Hn Hm1 Hm Ha B).
Qed.

End FpInflate.
