"""A tf.Module with one variable per way of getting (or not getting) gradient, for loader tests."""

from __future__ import annotations

import tensorflow as tf


class Zoo(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        v = lambda name, **kw: tf.Variable(tf.linspace(0.5, 1.5, 3), name=name, **kw)  # noqa: E731
        self.w_ok = v("w_ok")
        self.w_stop = v("w_stop")
        self.w_int = v("w_int")
        self.w_argmax = v("w_argmax")
        self.w_round = v("w_round")
        self.w_gather_params = tf.Variable(tf.linspace(0.5, 1.5, 5), name="w_gather_params")
        self.w_gather_index = v("w_gather_index")
        self.w_sign = v("w_sign")
        self.w_cond_pred = v("w_cond_pred")
        self.w_cond_branch = v("w_cond_branch")
        self.w_case = v("w_case")
        self.w_while_ok = v("w_while_ok")
        self.w_while_stop = v("w_while_stop")
        self.w_while_cond_only = v("w_while_cond_only")
        self.w_nested_ok = v("w_nested_ok")
        self.w_nested_stop = v("w_nested_stop")
        self.w_custom_ok = v("w_custom_ok")
        self.w_custom_none = v("w_custom_none")
        self.w_custom_zero = v("w_custom_zero")
        self.w_shape = v("w_shape")
        self.w_unused = v("w_unused")
        self.w_assign_src = v("w_assign_src")
        self.w_frozen = v("w_frozen", trainable=False)
        self.i_counter = tf.Variable([1, 2, 3], name="i_counter")

    @tf.function
    def _nested(self, x: tf.Tensor) -> tf.Tensor:
        return x * self.w_nested_ok + tf.stop_gradient(self.w_nested_stop)

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def loss(self, x: tf.Tensor) -> tf.Tensor:
        terms = [x * self.w_ok, tf.stop_gradient(self.w_stop) * x]
        terms.append(tf.cast(tf.cast(self.w_int * 10.0, tf.int32), tf.float32))
        terms.append(tf.cast(tf.argmax(self.w_argmax), tf.float32) * x)
        terms.append(tf.round(self.w_round) * x)
        index = tf.clip_by_value(tf.cast(self.w_gather_index, tf.int32), 0, 4)
        terms.append(tf.gather(self.w_gather_params, index) * x)
        terms.append(tf.sign(self.w_sign) * x)
        branch = tf.cond(
            tf.reduce_sum(self.w_cond_pred) > 0.0,
            lambda: x * self.w_cond_branch,
            lambda: x * 2.0,
        )
        terms.append(branch)
        terms.append(
            tf.switch_case(
                tf.cast(tf.reduce_sum(x) > 100.0, tf.int32),  # branch 0 on the test inputs
                [lambda: x * self.w_case, lambda: tf.stop_gradient(self.w_case) * x],
            )
        )

        def body(i: tf.Tensor, acc: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            acc = acc + x * self.w_while_ok + tf.stop_gradient(self.w_while_stop) * x
            return i + 1.0, acc

        def keep_going(i: tf.Tensor, acc: tf.Tensor) -> tf.Tensor:
            return i < tf.reduce_sum(self.w_while_cond_only)

        _, acc = tf.while_loop(keep_going, body, [tf.constant(0.0), tf.zeros([3])])
        terms.append(acc)
        terms.append(self._nested(x))

        @tf.custom_gradient
        def scaled(a: tf.Tensor, b: tf.Tensor, c: tf.Tensor):  # type: ignore[no-untyped-def]
            def grad(dy: tf.Tensor):  # type: ignore[no-untyped-def]
                return dy * 2.0, None, tf.zeros_like(c)

            return a * b * c, grad

        terms.append(
            scaled(self.w_custom_ok * 1.0, self.w_custom_none * 1.0, self.w_custom_zero * 1.0)
        )
        terms.append(tf.cast(tf.shape(self.w_shape), tf.float32) * x)
        terms.append(tf.cast(self.i_counter, tf.float32) * x)
        terms.append(x * self.w_frozen)
        self.w_unused.assign(self.w_assign_src)
        return tf.reduce_sum(tf.add_n(terms))


def verdict_inputs() -> list[tf.Tensor]:
    return [tf.constant([0.3, -0.7, 1.1])]
