"""One module per command of the command line: its arguments (add_arguments), its run(args) and
the orchestration it needs; the public Python API (certkit.api) calls their computations with
objects in memory.  certify: certified sandwiches; scale: the scaling laws; calibrate: the
real-model grid; audit: the chain by five routes; tables: certified constants."""
