"""Data (§5.1): subword vocabularies, `t2t-datagen`'s TFRecord files, and batches by tokens.

Raw text becomes shared-BPE ids and sharded, shuffled TFRecords; the input pipeline reads them
back as batches of about `batch_size` tokens. Nothing here knows the model.
"""
