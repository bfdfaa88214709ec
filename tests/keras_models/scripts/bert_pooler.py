"""A small keras_hub BERT trained through an MLM head; its pooled output feeds no loss.

The model returns `{"mlm": logits, "pooled": pooled_output}` compiled with
`loss={"mlm": ..., "pooled": None}`, so the backbone's pooler (`pooled_dense`) gets no gradient.

    gradcheck bert_pooler.py --loss model      # exits 1: pooled_dense/kernel and bias are dead
"""

from bert_models import build_model

model = build_model()
