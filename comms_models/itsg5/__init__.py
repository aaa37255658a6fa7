"""ETSI ITS-G5 channel model: CAM generation, encoding, captures, radio channel and congestion control."""
