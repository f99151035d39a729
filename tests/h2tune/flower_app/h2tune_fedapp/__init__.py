"""H2Tune Flower app for the tests: the shipped hf_ext.h2tune server and client code, plus test-only client hooks."""
