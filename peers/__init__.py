"""Code that only measures the peers (keras-hub's and Hugging Face transformers' ALBERT): it imports their
frameworks, so it is not part of the installed package (pyproject.toml installs albert_tf, data_gen and
run_scripts). albert_tf.benchmarking.peer_comparison runs it from a checkout, as `python -m peers.<module>` in
child processes of their own."""
