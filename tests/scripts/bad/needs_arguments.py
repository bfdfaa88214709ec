import argparse
import tensorflow as tf
parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
args = parser.parse_args()
w = tf.Variable(1.0)
