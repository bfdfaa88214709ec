"""TF1 graph: weighted sum of leaked-data flags, thresholded with tf.cast, minimized.

Source: https://github.com/tensorflow/tensorflow/issues/47083 ("No gradients provided for any
variable ... Problem with tf.cast op": weights Plocation, Pemail, Pimei, Pdevice, a threshold
`umbral`, auxiliary tf.Variable(0.) holders, and a tf.cast that turns a number < 1 into 0).
Reconstructed small (the issue's full code is long): the auxiliaries are written with tf.assign
and read back; the decision is tf.cast(score >= umbral, tf.float32).
TF truth: every variable gets None (minimize raises).
"""
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

filtracion_location = tf.placeholder(tf.float32, name="location_input")
filtracion_email = tf.placeholder(tf.float32, name="email_input")
filtracion_imei = tf.placeholder(tf.float32, name="imei_input")
filtracion_device = tf.placeholder(tf.float32, name="device_input")
y_ = tf.placeholder(tf.float32, name="target")

Plocation = tf.Variable(9., name="Plocation")
Pemail = tf.Variable(8., name="Pemail")
Pimei = tf.Variable(3., name="Pimei")
Pdevice = tf.Variable(2., name="Pdevice")
umbral = tf.Variable(10., name="umbral")

y_aux1 = tf.Variable(0.)
y_aux2 = tf.Variable(0.)
a1 = tf.assign(y_aux1, filtracion_location * Plocation + filtracion_email * Pemail)
a2 = tf.assign(y_aux2, filtracion_imei * Pimei + filtracion_device * Pdevice)
score = (a1 + a2) / umbral
y = tf.cast(score >= 1., tf.float32)  # "if a number is < 1, it turns into 0"
loss = tf.reduce_mean(tf.square(y_ - y))

if __name__ == "__main__":
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        feed = {filtracion_location: 1., filtracion_email: 0., filtracion_imei: 1., filtracion_device: 0., y_: 1.}
        sess.run(train, feed)
