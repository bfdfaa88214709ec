"""Issue with gradient flows in Vnet (knee-segmentation).

https://github.com/3D-MRI-Tissue-Segmentation/knee-segmentation/issues/43
fix: https://github.com/3D-MRI-Tissue-Segmentation/knee-segmentation/commit/ec1720d9c6e209c6c4e0eda741fc5391603b984c

VNet_Small_Relative (a subclassed tf.keras.Model trained with compile/fit) computes the deepest
block x3, a compressor branch on it, and the decoder step u3 = up_conv2(up_3(x3) + comp), but the
next decoder step reads the wrong tensor: it upsamples x2 instead of u3, so u3 is thrown away,
so fit warns "Gradients do not exist for variables [c3/..., cu3/..., upc2/..., compessor_*,
dense*]". The authors' fix (commit ec1720d, "updates to vnet"): feed u3 to self.up_2.
(Blocks shrunk to one layer each; shapes tiny.)
"""
import numpy as np
import tensorflow as tf
from tensorflow.keras import layers

tf.random.set_seed(0)


class VNet_Small_Relative(tf.keras.Model):
    def __init__(self, num_channels=2, num_classes=1):
        super().__init__(name="vnet_small_relative")
        self.conv_1 = layers.Conv3D(num_channels, 3, padding="same", activation="relu", name="c1")
        self.conv_2 = layers.Conv3D(num_channels * 2, 3, padding="same", activation="relu", name="c2")
        self.conv_3 = layers.Conv3D(num_channels * 4, 3, padding="same", activation="relu", name="c3")
        self.up_3 = layers.Conv3DTranspose(num_channels * 2, 2, strides=2, name="cu3")
        self.up_2 = layers.Conv3DTranspose(num_channels, 2, strides=2, name="cu2")
        self.up_conv2 = layers.Conv3D(num_channels * 2, 3, padding="same", activation="relu", name="upc2")
        self.up_conv1 = layers.Conv3D(num_channels, 3, padding="same", activation="relu", name="upc1")
        self.compressor = layers.Conv3D(1, 2, strides=2, padding="valid", activation="relu", name="compessor_0")
        self.comp_dense_1, self.comp_dense_3 = layers.Dense(4, activation="relu"), layers.Dense(1, activation="tanh")
        self.conv_1x1 = layers.Conv3D(num_classes, 3, padding="same", activation="sigmoid")

    def call(self, inputs):
        image_inputs, pos_inputs = inputs
        x1 = self.conv_1(image_inputs)
        x2 = self.conv_2(layers.MaxPooling3D(pool_size=(2, 2, 2))(x1))
        x3 = self.conv_3(layers.MaxPooling3D(pool_size=(2, 2, 2))(x2))
        comp = self.comp_dense_1(layers.Flatten()(self.compressor(x3)))
        comp = self.comp_dense_3(tf.concat([comp, pos_inputs], axis=-1))
        u3 = self.up_conv2(layers.add([self.up_3(x3), comp[:, None, None, None, :]]))
        u2 = self.up_2(x2)
        u2 = self.up_conv1(u2)
        return self.conv_1x1(u2)


rng = np.random.RandomState(0)
volumes, masks = rng.rand(4, 8, 8, 8, 1).astype("float32"), (rng.rand(4, 8, 8, 8, 1) > 0.5).astype("float32")
pos = np.repeat(np.array([[1.0, 0.0, -0.5]], dtype="float32"), 4, axis=0)
vnet = VNet_Small_Relative()
vnet.compile(optimizer=tf.keras.optimizers.Adam(1e-3), loss="binary_crossentropy")
vnet.fit([volumes, pos], masks, batch_size=2, epochs=1, verbose=2)
