"""Training machinery shared by pretraining and fine-tuning: the Trainer, LAMB/AdamW and the schedule,
distribution strategies, the host allocator, bfloat16 support, metrics and the pretraining losses."""
