"""The jobs ALBERT is used for, each built from plain arguments and run from Python: pretraining (and the demo), GLUE,
SQuAD and RACE, and the fine-tuning driver they share. The one library package that reads data_gen."""
