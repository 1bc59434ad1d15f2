"""The heavy top of paper 001 §3 in three formulations (family ``top``)."""
