"""Node-pair rounds: which node (or link) of a cluster is slow (issue 27). Torch-free except harness."""
