"""`python -m albert_tf.tools.train_spm`: trains a SentencePiece model with the official ALBERT
settings (the library function is albert_tf.text.train_sentencepiece; the flags are
albert_tf/cli/train_spm.py's).

  python -m albert_tf.tools.train_spm --input_file=corpus.txt --model_prefix=spm/30k-clean \
      --vocab_size=30000

Unigram, <pad>=0, <unk>=1, no BOS/EOS, control symbols [CLS]=2, [SEP]=3, [MASK]=4.
"""

if __name__ == "__main__":
  from albert_tf.common import console  # pylint: disable=g-import-not-at-top
  console.quiet_startup()  # before anything imports TensorFlow
  from albert_tf.cli.train_spm import main  # pylint: disable=g-import-not-at-top
  main()
