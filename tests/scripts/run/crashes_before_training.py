"""A script that fails before training: its data loader raises while the model is built."""

import keras


def load_dataset(path):
    raise ValueError(f"no training data at {path!r}")


def main():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    features, labels = load_dataset("data/train.npz")
    model.fit(features, labels, epochs=1)


if __name__ == "__main__":
    main()
