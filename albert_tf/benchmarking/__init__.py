"""Measuring speed and memory: analytic FLOPs (flops), the matmul peak, peak RSS and checkpoint size (probes), the
timed workloads (workloads), create_pretraining_data's rate and memory (pretraining_data_throughput), the peer
comparison (peer_comparison) and fine-tuning on real text beside the peers (finetune_text), each in a process of its
own where memory is measured (child_process), and the tables and loss-curve comparisons (tables).

Units: MB and GFLOP are decimal (1e6 bytes, 1e9 FLOP).
"""
