"""UNTRUSTED producers of certificates.  Nothing here can make a Verdict; a bad witness can only
be REJECTED by the kernel."""
