"""Interconnect: ring links and collectives (`ring`), and T3's fused GEMM + reduce-scatter (`t3`)."""
