"""Prints the encoder's parameter count (pooler included, heads excluded), or the paper's tables.

    python -m run_scripts.count_params --preset=albert-base --share_type=attention
    python -m run_scripts.count_params --paper_tables
"""

from absl import flags

from albert_tf.config import load_config
from albert_tf.models import param_count
from run_scripts import entry

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", None, "A named preset, e.g. albert-base.")
flags.DEFINE_string("albert_config_file", None, "An albert_config.json.")
flags.DEFINE_enum("share_type", None, ["all", "attention", "ffn", "none"], "Override share_type.")
flags.DEFINE_integer("embedding_size", None, "Override embedding_size (E).")
flags.DEFINE_integer("num_hidden_groups", None, "Override num_hidden_groups.")
flags.DEFINE_boolean("paper_tables", False, "Print Tables 3 and 4 of the paper with exact counts.")


def main(argv):
    del argv
    if FLAGS.paper_tables:
        print(param_count.paper_tables())
        return
    overrides = {name: getattr(FLAGS, name) for name in ("share_type", "embedding_size", "num_hidden_groups")
                 if getattr(FLAGS, name) is not None}
    config = load_config(FLAGS.albert_config_file, FLAGS.preset, **overrides)
    count = param_count.encoder_parameters(config)
    print(f"{count:,} parameters ({count / 1e6:.2f}M): embeddings {param_count.embedding_parameters(config):,}, "
          f"pooler {param_count.pooler_parameters(config):,}, share_type={config.share_type}, "
          f"E={config.embedding_size}, H={config.hidden_size}, L={config.num_hidden_layers}, "
          f"groups={config.num_hidden_groups}, inner_group_num={config.inner_group_num}")


if __name__ == "__main__":
    entry.run(main)
