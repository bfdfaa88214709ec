"""Neural style transfer: gradient descent on the pixels of an image held in a tf.Variable;
tape.gradient(loss, combination_image) in a @tf.function, the VGG19 feature extractor's own
(trainable) weights are read but never asked for.

Adapted from https://keras.io/examples/generative/neural_style_transfer/
(https://github.com/keras-team/keras-io/blob/master/examples/generative/neural_style_transfer.py)
Changes: random 32x32 images instead of downloaded photos, 2 iterations, and in place of VGG19
(20 million weights) a small stack of convolutions under VGG19's layer names, built as
keras.applications builds VGG19 (a functional model, then a feature extractor over every
layer's output).
"""

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

total_variation_weight = 1e-6
style_weight = 1e-6
content_weight = 2.5e-8

img_nrows = 32
img_ncols = 32


def preprocess_image(seed):
    # was: load_img(image_path, target_size=(img_nrows, img_ncols)) + img_to_array
    img = np.random.RandomState(seed).uniform(0, 255, (img_nrows, img_ncols, 3))
    img = np.expand_dims(img.astype("float32"), axis=0)
    img = img[..., ::-1] - np.array([103.939, 116.779, 123.68], "float32")  # VGG's preprocessing
    return tf.convert_to_tensor(img)


def gram_matrix(x):
    x = tf.transpose(x, (2, 0, 1))
    features = tf.reshape(x, (tf.shape(x)[0], -1))
    gram = tf.matmul(features, tf.transpose(features))
    return gram


def style_loss(style, combination):
    S = gram_matrix(style)
    C = gram_matrix(combination)
    channels = 3
    size = img_nrows * img_ncols
    return tf.reduce_sum(tf.square(S - C)) / (4.0 * (channels**2) * (size**2))


def content_loss(base, combination):
    return tf.reduce_sum(tf.square(combination - base))


def total_variation_loss(x):
    a = tf.square(
        x[:, : img_nrows - 1, : img_ncols - 1, :] - x[:, 1:, : img_ncols - 1, :]
    )
    b = tf.square(
        x[:, : img_nrows - 1, : img_ncols - 1, :] - x[:, : img_nrows - 1, 1:, :]
    )
    return tf.reduce_sum(tf.pow(a + b, 1.25))


def small_vgg():
    # was: model = vgg19.VGG19(weights="imagenet", include_top=False)
    inputs = keras.Input((None, None, 3))
    x = inputs
    for block, filters in enumerate((4, 8, 8, 8, 8), start=1):
        x = layers.Conv2D(filters, 3, padding="same", activation="relu", name=f"block{block}_conv1")(x)
        x = layers.Conv2D(filters, 3, padding="same", activation="relu", name=f"block{block}_conv2")(x)
        x = layers.MaxPooling2D(2, name=f"block{block}_pool")(x)
    return keras.Model(inputs, x, name="vgg19")


model = small_vgg()

outputs_dict = dict([(layer.name, layer.output) for layer in model.layers])

feature_extractor = keras.Model(inputs=model.inputs, outputs=outputs_dict)

style_layer_names = [
    "block1_conv1",
    "block2_conv1",
    "block3_conv1",
    "block4_conv1",
    "block5_conv1",
]
content_layer_name = "block5_conv2"


def compute_loss(combination_image, base_image, style_reference_image):
    input_tensor = tf.concat(
        [base_image, style_reference_image, combination_image], axis=0
    )
    features = feature_extractor(input_tensor)

    loss = tf.zeros(shape=())

    layer_features = features[content_layer_name]
    base_image_features = layer_features[0, :, :, :]
    combination_features = layer_features[2, :, :, :]
    loss = loss + content_weight * content_loss(
        base_image_features, combination_features
    )
    for layer_name in style_layer_names:
        layer_features = features[layer_name]
        style_reference_features = layer_features[1, :, :, :]
        combination_features = layer_features[2, :, :, :]
        sl = style_loss(style_reference_features, combination_features)
        loss += (style_weight / len(style_layer_names)) * sl

    loss += total_variation_weight * total_variation_loss(combination_image)
    return loss


@tf.function
def compute_loss_and_grads(combination_image, base_image, style_reference_image):
    with tf.GradientTape() as tape:
        loss = compute_loss(combination_image, base_image, style_reference_image)
    grads = tape.gradient(loss, combination_image)
    return loss, grads


optimizer = keras.optimizers.SGD(
    keras.optimizers.schedules.ExponentialDecay(
        initial_learning_rate=100.0, decay_steps=100, decay_rate=0.96
    )
)

base_image = preprocess_image(0)
style_reference_image = preprocess_image(1)
combination_image = tf.Variable(preprocess_image(0))

iterations = 2
for i in range(1, iterations + 1):
    loss, grads = compute_loss_and_grads(
        combination_image, base_image, style_reference_image
    )
    optimizer.apply_gradients([(grads, combination_image)])
    print("Iteration %d: loss=%.2f" % (i, loss))
