"""The official evaluations and what feeds them: SQuAD's v1.1 / v2.0 scoring (squad_evaluation), the model outputs
turned into SQuAD answers and prediction files (squad_postprocess), and conlleval's entity scores (conll_evaluation).
They read the readers' examples and features (data_gen.readers); no reader imports them."""
