"""One module per command of the command line, on top of the library: its arguments
(add_arguments) and its run(args), which makes one call of the library below and renders what it
returns.  certkit/cli.py alone imports them, and no command imports another (tests/docs/test_layout.py);
the public Python API (certkit.api) calls the same library: certify over certkit.driver, scale over
certkit.scaling, calibrate over certkit.calibration, audit over certkit.auditing, tables over
certkit.symbolic.tables."""
