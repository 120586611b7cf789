"""A compare run: the certified error of compressed heads, over many heads or layers, into a folder
(`certkit compare`; certkit.compare and certkit.compare_layer certify one head or one layer in memory,
certkit.search.compare).

    run.py      compare_heads: every head (or layer) at every setting, a kernel-VERIFIED certificate
                each, in worker processes or on Dask, resumable, the summary rewritten after each head
    summary.py  summary.csv / .json / .md and the figures of a run: per method, per head or layer, the
                cheapest setting within eps
"""
