"""Builds the small keras_hub BERT models that bert_pooler*.py check (no model at import)."""

import keras
import keras_hub

VOCABULARY = 50
SEQUENCE_LENGTH = 8


def build_model(pooler_l2=None):
    """A BERT with an MLM head; `{"mlm": logits, "pooled": pooled_output}`, no loss on pooled."""
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCABULARY,
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=SEQUENCE_LENGTH,
        dropout=0.0,
    )
    if pooler_l2 is not None:
        # BertBackbone takes no regularizer argument; Keras reads it from the variable.
        backbone.get_layer("pooled_dense").kernel.regularizer = keras.regularizers.L2(pooler_l2)
    inputs = {
        name: keras.Input((SEQUENCE_LENGTH,), dtype="int32", name=name)
        for name in ("token_ids", "segment_ids", "padding_mask")
    }
    features = backbone(inputs)
    logits = keras.layers.Dense(VOCABULARY, name="mlm_head")(features["sequence_output"])
    model = keras.Model(inputs, {"mlm": logits, "pooled": features["pooled_output"]})
    model.compile(
        optimizer="adam",
        loss={"mlm": keras.losses.SparseCategoricalCrossentropy(from_logits=True), "pooled": None},
    )
    return model
