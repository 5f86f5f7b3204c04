"""Predictions for larger clusters from the measured tables: the alpha-beta fits of the collectives,
their algorithm costs at N ranks and the training step (`model`), hierarchical clusters of nodes
(`cluster`), the prediction tables (`tables`), plots and report section. Reads tables only."""
