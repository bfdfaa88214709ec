"""The BERT of bert_pooler.py with an L2 penalty on its pooler's kernel.

The kernel now gets a gradient, but only from the regularizer (it is only ever pulled towards
zero: GC206); the pooler's bias stays dead.

    gradcheck bert_pooler_regularized.py --loss model      # exits 1: pooled_dense/bias is dead
"""

from bert_models import build_model

model = build_model(pooler_l2=0.01)
