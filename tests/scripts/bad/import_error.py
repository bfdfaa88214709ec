import tensorflow as tf
import gradcheck_missing_module
