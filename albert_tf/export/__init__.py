"""SavedModel exports, one module each.

- `tfhub_encoder`: the TF-Hub-style encoder (with `.mlm`), written beside the preprocessor by `export_hub_modules`.
- `preprocessor`: the in-graph AlbertPreprocessor and its SavedModel.
- `text_classifier`: a fine-tuned classifier behind its preprocessor, raw strings in.
- `serving`: a fine-tuned model's serving signature.
"""
