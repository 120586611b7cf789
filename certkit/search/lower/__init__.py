"""Untrusted lower search (docs/mathematics.md §8.1): decoding contractions and Frobenius tails.

For message rows i_1..i_M and disjoint column cells C_1..C_M, T_A[a, b] = A_{i_a}(C_b).
* margin (Lemma 8.1): T_A[a,a] - sum_{b != a} |T_A[a,b]| > eps for all a  =>  r_eps >= M;
* inverse norm (Lemma 8.2): eps ||T_A^{-1}||_inf < 1  =>  r_eps >= M (weaker hypothesis);
* Frobenius tail (Lemma 8.3) on C = S A G: sum_{l >= M} sigma_l(C)^2 > |S| eps^2  =>  r_eps >= M.

Candidates come from: one cell holding every column (M = 1 whenever eps < 1); argmax cells of
peaked rows; "farthest-point" messages (l1 farthest-point traversal of the rows) with every
column assigned to the message that weighs it most, pruned until the test passes; on a causal or
sliding-window head, the staircase (messages in order, each cell inside the prefix its message adds:
T lower triangular, docs/mathematics.md §8.5).  All tests
here are float with a safety margin; each returned candidate is decided by the kernel.

One idea per module: decoding.py (the contraction T_A, argmax cells and the float tests),
messages.py (which rows are messages: the farthest-row traversal, the peaked rows), pruning.py
(dropping messages until a test passes), descent.py (coordinate descent on the cells), growth.py
(the greedy growth for Lemma 8.2), soft.py (soft decoders), staircase.py (causal and
sliding-window heads), frobenius.py (Lemma 8.3's candidates) and candidates.py (the decoding
candidates of every start, best-first: the search the sandwich runs).
"""
