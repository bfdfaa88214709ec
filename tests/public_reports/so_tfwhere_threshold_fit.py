"""Non differentiable loss function keras (thresholded segmentation mask in the loss)
http://xiaobeizi.cn/x/6JuuQQjucd  (translated copy of the Stack Overflow question and answer)

The user wants a 0/1 mask from a segmentation model, so the custom Keras loss thresholds
the prediction with tf.where(y_pred >= 0.5, 1.0, 0.0), then MSE; model.fit
fails with "No gradients provided for any variable" (a Lambda threshold layer did the same).
Answer: tf.where with constant branches gives no gradient; train on the continuous output
(a sigmoid output pushes values to 0/1) and round only at prediction time.
"""
import numpy as np
import tensorflow as tf
import keras

keras.utils.set_random_seed(0)

def loss(y_true, y_pred):
    tresholded_pred = tf.where(y_pred >= 0.5, 1.0, 0.0)
    sq_diff = tf.square(y_true - tresholded_pred)
    return tf.reduce_mean(sq_diff, axis=-1)

inputs = keras.Input((8, 8, 3))
h = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(inputs)
mask = keras.layers.Conv2D(1, 1, activation="sigmoid")(h)
model = keras.Model(inputs, mask)
model.compile(optimizer="adam", loss=loss)
x = np.random.rand(8, 8, 8, 3).astype("float32")
y = (np.random.rand(8, 8, 8, 1) > 0.5).astype("float32")
model.fit(x, y, epochs=1, batch_size=4, verbose=2)
pred = np.round(model.predict(x, verbose=0))
