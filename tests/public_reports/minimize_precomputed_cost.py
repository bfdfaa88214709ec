"""ValueError: No gradients provided for any variable
https://github.com/tensorflow/tensorflow/issues/42167

The user computed `cost` (minus the mean of the summed log of y_N) eagerly and
then passed a lambda returning that cost to `tf.keras.optimizers.Adam(0.5).minimize(loss, var_list=[y_N])`.
The lambda returns a tensor computed before minimize() opened its GradientTape, so y_N gets no
gradient. The answer (WindQAQ): put the computation inside the lambda so it runs in the scope of
the GradientTape (the lambda itself returns minus the mean of the summed log of y_N).
"""
import tensorflow as tf
import tf_keras as keras

y_N = tf.Variable([1., 2., 3.], name="dd")
cost = -tf.reduce_mean(input_tensor=tf.reduce_sum(input_tensor=tf.math.log(y_N), axis=0))

loss = lambda: cost

opt = keras.optimizers.Adam(0.5)
for step in range(2):
    try:
        opt.minimize(loss, var_list=[y_N])
    except ValueError as e:  # "No gradients provided for any variable"
        print("step", step, "failed:", str(e)[:80])
print(y_N.numpy())
