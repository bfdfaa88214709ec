"""The model's map on hand-made graphs: scopes as nodes, repeated blocks folded, cuts placed."""

from __future__ import annotations

from gradcheck_cli.analysis.analyse import analyse
from gradcheck_cli.analysis.model_map import LOSS_ID, MapEdge, MapStatus, ModelMap, model_map
from gradcheck_cli.graph.model import Program
from tests.graph_factory import BodyFactory, program


def _mapped(prog: Program, max_nodes: int = 60) -> ModelMap:
    return model_map(prog, analyse(prog).verdicts, max_nodes)


def _by_label(drawn: ModelMap) -> dict[str, str]:
    return {node.label: node.id for node in drawn.nodes}


def _edges(drawn: ModelMap) -> set[tuple[str, str]]:
    label = {node.id: node.label for node in drawn.nodes}
    return {(label[e.source], label[e.target]) for e in drawn.edges}


def _mlp(cut: bool = False) -> Program:
    """images -> hidden1 (a Cast round trip when `cut`) -> out -> loss."""
    top = BodyFactory("top")
    w = top.arg("hidden1/w", "resource")
    v = top.arg("out/v", "resource")
    images = top.op("images", "Placeholder")
    read = top.op("hidden1/w/read", "ReadVariableOp", w)
    if cut:
        as_int = top.op("hidden1/Cast", "Cast", read, dtypes=("int32",))
        read = top.op("hidden1/Cast_1", "Cast", as_int)
    hidden = top.op("hidden1/MatMul", "MatMul", images, read)
    out = top.op("out/MatMul", "MatMul", hidden, top.op("out/v/read", "ReadVariableOp", v))
    loss = top.op("loss", "Sum", out)
    return program(top.body(loss), loss)


def test_scopes_become_nodes_and_data_flow_becomes_edges() -> None:
    drawn = _mapped(_mlp())
    assert set(_by_label(drawn)) == {"images", "hidden1", "out", "loss"}
    assert _edges(drawn) == {("images", "hidden1"), ("hidden1", "out"), ("out", "loss")}
    hidden1 = drawn.node(_by_label(drawn)["hidden1"])
    assert [v.name for v in hidden1.variables] == ["hidden1/w"]
    assert hidden1.ops == 2  # the read and the MatMul; the variable is a source, not an op
    assert not drawn.cuts


def test_statuses_colour_nodes_the_worst_variable_first() -> None:
    drawn = _mapped(_mlp(cut=True))
    status = {node.label: node.status for node in drawn.nodes}
    assert status["hidden1"] is MapStatus.BLOCKED
    assert status["out"] is MapStatus.OK
    assert status["images"] is MapStatus.NONE
    allowed = drawn.accepting(["hidden1/w"])
    assert allowed.node(_by_label(drawn)["hidden1"]).status is MapStatus.ALLOWED


def test_a_cut_inside_a_scope_sits_on_its_node() -> None:
    drawn = _mapped(_mlp(cut=True))
    (cut,) = drawn.cuts
    assert (cut.op, cut.op_type, cut.variables) == ("hidden1/Cast", "Cast", ("hidden1/w",))
    assert cut.node == _by_label(drawn)["hidden1"] and cut.edge is None
    assert drawn.with_codes({"hidden1/Cast": "GC102"}).cuts[0].code == "GC102"


def test_a_cut_on_a_value_from_another_scope_sits_on_the_edge_between_them() -> None:
    top = BodyFactory("top")
    w = top.arg("encoder/w", "resource")
    encoded = top.op("encoder/Mul", "Mul", top.op("encoder/w/read", "ReadVariableOp", w))
    stopped = top.op("head/StopGradient", "StopGradient", encoded)
    loss = top.op("loss", "Sum", top.op("head/Square", "Square", stopped))
    drawn = _mapped(program(top.body(loss), loss))
    (cut,) = drawn.cuts
    ids = _by_label(drawn)
    assert cut.node == ids["head"]
    assert cut.edge == MapEdge(ids["encoder"], ids["head"])
    assert cut.edge in drawn.edges
    assert drawn.node(ids["encoder"]).status is MapStatus.BLOCKED


def test_repeated_blocks_of_one_structure_fold_into_one_node_with_a_count() -> None:
    top = BodyFactory("top")
    x = top.op("inputs", "Placeholder")
    for i in range(12):
        w = top.arg(f"encoder/layer_{i}/dense/kernel", "resource")
        read = top.op(f"encoder/layer_{i}/dense/ReadVariableOp", "ReadVariableOp", w)
        x = top.op(f"encoder/layer_{i}/dense/MatMul", "MatMul", x, read)
        x = top.op(f"encoder/layer_{i}/Relu", "Relu", x)
    w = top.arg("head/kernel", "resource")
    x = top.op("head/MatMul", "MatMul", x, top.op("head/Read", "ReadVariableOp", w))
    loss = top.op("loss", "Sum", x)
    drawn = _mapped(program(top.body(loss), loss))
    ids = _by_label(drawn)
    assert set(ids) == {"inputs", "encoder/layer_0…11", "head", "loss"}
    layers = drawn.node(ids["encoder/layer_0…11"])
    # Each layer's read and MatMul; its Relu, set beside its `dense`, is passed through.
    assert layers.count == 12 and layers.ops == 24 and len(layers.variables) == 12
    assert _edges(drawn) == {
        ("inputs", "encoder/layer_0…11"),
        ("encoder/layer_0…11", "head"),
        ("head", "loss"),
    }


def test_a_block_with_a_cut_is_not_folded_and_splits_the_run_around_it() -> None:
    top = BodyFactory("top")
    x = top.op("inputs", "Placeholder")
    for i in range(7):
        w = top.arg(f"block{i}/kernel", "resource")
        read = top.op(f"block{i}/Read", "ReadVariableOp", w)
        if i == 3:
            read = top.op("block3/StopGradient", "StopGradient", read)
        x = top.op(f"block{i}/MatMul", "MatMul", x, read)
    loss = top.op("loss", "Sum", x)
    drawn = _mapped(program(top.body(loss), loss))
    assert set(_by_label(drawn)) == {"inputs", "block0…2", "block3", "block4…6", "loss"}
    assert _edges(drawn) >= {("block0…2", "block3"), ("block3", "block4…6")}


def test_only_blocks_numbered_one_after_another_fold() -> None:
    """Two alike blocks with an unlike one between them stay apart: one node for both would
    draw the data flowing back up the map."""
    top = BodyFactory("top")
    x = top.op("inputs", "Placeholder")
    for i, op in enumerate(("Relu", "Tanh", "Relu")):
        x = top.op(f"stage{i + 1}/{op}", op, x)
    loss = top.op("loss", "Sum", x)
    labels = set(_by_label(_mapped(program(top.body(loss), loss))))
    assert labels == {"inputs", "stage1", "stage2", "stage3", "loss"}


def _flat_layers(blocks: tuple[int, int], units: int) -> Program:
    """A functional model's flat layer names, as Keras writes them (`stage1_block2_1_conv_1`):
    two stages of `blocks` blocks of `units` units."""
    top = BodyFactory("top")
    x = top.op("images", "Placeholder")
    for stage in (1, 2):
        for block in range(1, blocks[stage - 1] + 1):
            for unit in range(1, units + 1):
                for layer, op in (("conv", "Conv2D"), ("bn", "FusedBatchNormV3"), ("relu", "Relu")):
                    scope = f"net_1/stage{stage}_block{block}_{unit}_{layer}_1"
                    if layer == "relu":
                        x = top.op(f"{scope}/Relu", op, x)
                        continue
                    w = top.arg(f"stage{stage}_block{block}_{unit}_{layer}/w", "resource")
                    read = top.op(f"{scope}/Cast/ReadVariableOp", "ReadVariableOp", w)
                    x = top.op(f"{scope}/{op}", op, x, read)
    loss = top.op("loss", "Sum", x)
    return program(top.body(loss), loss)


def test_flat_layer_names_are_grouped_by_the_words_they_share() -> None:
    drawn = _mapped(_flat_layers(blocks=(6, 7), units=3))
    ids = _by_label(drawn)
    assert set(ids) == {"images", "net_1/stage1_block1…6", "net_1/stage2_block1…7", "loss"}
    stage1 = drawn.node(ids["net_1/stage1_block1…6"])
    assert stage1.count == 6 and len(stage1.variables) == 6 * 3 * 2
    assert _edges(drawn) == {
        ("images", "net_1/stage1_block1…6"),
        ("net_1/stage1_block1…6", "net_1/stage2_block1…7"),
        ("net_1/stage2_block1…7", "loss"),
    }


def test_a_smaller_model_with_flat_names_shows_each_layer() -> None:
    ids = _by_label(_mapped(_flat_layers(blocks=(1, 2), units=1)))
    # `_1` ends a layer's name (made unique by its call): it does not split it.
    layers = {f"net_1/stage1_block1_1_{layer}_1" for layer in ("conv", "bn", "relu")}
    assert set(ids) == {"images", *layers, "net_1/stage2_block1…2", "loss"}


def test_a_read_named_under_a_cast_the_optimizer_dropped_is_in_its_layer() -> None:
    drawn = _mapped(_flat_layers(blocks=(1, 2), units=1))
    assert not any(node.label.endswith("/Cast") for node in drawn.nodes)
    conv = drawn.node(_by_label(drawn)["net_1/stage1_block1_1_conv_1"])
    assert [v.name for v in conv.variables] == ["stage1_block1_1_conv/w"]


def test_a_variable_only_an_update_uses_sits_with_that_update() -> None:
    """A batch norm's moving mean, in training: assigned, never read on the loss's way."""
    top = BodyFactory("top")
    mean = top.arg("bn/moving_mean", "resource")
    images = top.op("images", "Placeholder")
    moments = top.op("model_1/bn_1/moments/Mean", "Mean", images)
    top.op("model_1/bn_1/AssignMovingAvg", "AssignSubVariableOp", mean, moments)
    loss = top.op("loss", "Sum", top.op("model_1/bn_1/Relu", "Relu", moments))
    drawn = _mapped(program(top.body(loss), loss, trainable={"bn/moving_mean": False}))
    bn = drawn.node(_by_label(drawn)["model_1/bn_1"])
    assert [(v.name, v.status) for v in bn.variables] == [("bn/moving_mean", MapStatus.FROZEN)]
    assert "bn" not in _by_label(drawn)


def test_deep_scopes_fold_into_their_parents_to_keep_the_map_small() -> None:
    top = BodyFactory("top")
    x = top.op("inputs", "Placeholder")
    for i in range(30):
        x = top.op(f"model/part{chr(65 + i % 26)}{i}/inner/Relu", "Relu", x)
    loss = top.op("loss", "Sum", x)
    prog = program(top.body(loss), loss)
    assert _mapped(prog).depth == 3
    small = _mapped(prog, max_nodes=10)
    assert small.depth == 1 and {n.label for n in small.nodes} == {"inputs", "model", "loss"}


def test_a_called_function_s_ops_take_the_call_s_scope_and_its_data_flow() -> None:
    inner = BodyFactory("inner_fn")
    a = inner.arg("x")
    b = inner.arg("w", "resource")
    product = inner.op(
        "dense/MatMul", "MatMul", a, inner.op("dense/MatMul/ReadVariableOp", "ReadVariableOp", b)
    )
    top = BodyFactory("top")
    w = top.arg("model/dense/kernel", "resource")
    images = top.op("images", "Placeholder")
    call = top.op(
        "model/StatefulPartitionedCall", "StatefulPartitionedCall", images, w, f=("inner_fn",)
    )
    loss = top.op("loss", "Sum", top.op("head/Relu", "Relu", call))
    prog = program(top.body(loss), loss, inner.body(product))
    drawn = _mapped(prog)
    ids = _by_label(drawn)
    assert _edges(drawn) == {("images", "model/dense"), ("model/dense", "head"), ("head", "loss")}
    assert [v.name for v in drawn.node(ids["model/dense"]).variables] == ["model/dense/kernel"]
    # The read is named under the op it feeds (`dense/MatMul/...`): it is in that op's scope.
    assert drawn.node(ids["model/dense"]).ops == 2 and "model" not in ids


def test_a_large_graph_is_mapped_in_one_walk() -> None:
    top = BodyFactory("top")
    x = top.op("inputs", "Placeholder")
    for i in range(25_000):
        scope = f"net/block_{i % 500}/unit{i // 500}"
        w = top.arg(f"{scope}/w", "resource") if i % 50 == 0 else None
        x = top.op(f"{scope}/Add", "AddV2", x, x)
        x = top.op(
            f"{scope}/Mul", "Mul", x, top.op(f"{scope}/Read", "ReadVariableOp", w) if w else x
        )
        x = top.op(f"{scope}/Relu", "Relu", x)
        x = top.op(f"{scope}/Identity", "Identity", x)
    loss = top.op("loss", "Sum", x)
    prog = program(top.body(loss), loss)
    drawn = model_map(prog, ())  # 100,000 ops; the verdicts are not the point here
    assert len(drawn.nodes) <= 60
    assert sum(node.ops for node in drawn.nodes) == 100_000 + 500 + 1  # and the loss
    assert drawn.edges


def test_the_loss_computed_at_the_top_level_is_the_loss_node() -> None:
    drawn = _mapped(_mlp())
    loss = drawn.node(LOSS_ID)
    assert loss.ops == 1 and not loss.variables


def test_a_layer_s_inner_scopes_with_no_variable_or_cut_stay_in_the_layer() -> None:
    top = BodyFactory("top")
    x = top.op("images", "Placeholder")
    gamma = top.arg("bn/gamma", "resource")
    mean = top.op("model/bn/moments/Mean", "Mean", x)
    x = top.op(
        "model/bn/batchnorm/mul", "Mul", mean, top.op("model/bn/Read", "ReadVariableOp", gamma)
    )
    kernel = top.arg("head/kernel", "resource")
    read = top.op("model/head/inner/Read", "ReadVariableOp", kernel)
    x = top.op("model/head/inner/MatMul", "MatMul", x, read)
    loss = top.op("loss", "Sum", x)
    drawn = _mapped(program(top.body(loss), loss))
    ids = _by_label(drawn)
    assert set(ids) == {"images", "model/bn", "model/head/inner", "loss"}
    assert drawn.node(ids["model/bn"]).ops == 3  # its moments and batchnorm ops with its read


def test_blocks_fold_whatever_numbers_made_their_names_and_inner_names_unique() -> None:
    """keras_hub's layers, called: `transformer_layer_0_1`, `transformer_layer_1_1`; the
    second one's dropout is `dropout_1_1` where the first one's is `dropout_1`."""
    top = BodyFactory("top")
    x = top.op("tokens", "Placeholder")
    for i, dropout in enumerate(("dropout_1", "dropout_1_1", "dropout_2_1")):
        scope = f"bert_1/transformer_layer_{i}_1"
        w = top.arg(f"transformer_layer_{i}/dense/kernel", "resource")
        read = top.op(f"{scope}/dense_1/ReadVariableOp", "ReadVariableOp", w)
        x = top.op(f"{scope}/dense_1/MatMul", "MatMul", x, read)
        x = top.op(f"{scope}/{dropout}/Mul", "Mul", x, x)
    loss = top.op("loss", "Sum", x)
    drawn = _mapped(program(top.body(loss), loss))
    ids = _by_label(drawn)
    assert set(ids) == {"tokens", "bert_1/transformer_layer_0…2_1", "loss"}
    assert drawn.node(ids["bert_1/transformer_layer_0…2_1"]).count == 3


def _residual(stages: tuple[str, ...]) -> Program:
    """A functional model's residual stream: each block's output added to its input by an
    `Add` set directly in the model's scope, beside the blocks' own scopes."""
    top = BodyFactory("top")
    x = top.op("images", "Placeholder")
    for number, block in enumerate(stages):
        w = top.arg(f"{block}/kernel", "resource")
        read = top.op(f"net_1/{block}/ReadVariableOp", "ReadVariableOp", w)
        out = top.op(f"net_1/{block}/Conv2D", "Conv2D", x, read)
        x = top.op(f"net_1/Add_{number}", "AddV2", x, out)
    loss = top.op("loss", "Sum", x)
    return program(top.body(loss), loss)


def test_a_residual_stream_is_drawn_as_the_chain_of_its_blocks() -> None:
    """Data passes through the model's own `Add`s: they are no node (one node for all of them
    would be fed by every block and feed every block), and an edge a longer path implies (the
    stream reaches every later block) is left out."""
    drawn = _mapped(_residual(("down_0", "stage_0", "down_1", "stage_1")))
    ids = _by_label(drawn)
    assert set(ids) == {
        "images",
        "net_1/down_0",
        "net_1/stage_0",
        "net_1/down_1",
        "net_1/stage_1",
        "loss",
    }
    assert _edges(drawn) == {
        ("images", "net_1/down_0"),
        ("net_1/down_0", "net_1/stage_0"),
        ("net_1/stage_0", "net_1/down_1"),
        ("net_1/down_1", "net_1/stage_1"),
        ("net_1/stage_1", "loss"),
    }


def test_alike_blocks_with_another_between_them_do_not_fold() -> None:
    """`down_0` and `down_1` are alike and numbered one after the other, and the stream from
    one reaches the other, but `stage_0` lies between them: one node for both would send the
    data back up the map."""
    labels = set(_by_label(_mapped(_residual(("down_0", "stage_0", "down_1", "stage_1")))))
    assert "net_1/down_0…1" not in labels
    folded = set(_by_label(_mapped(_residual(("stage_0", "stage_1", "stage_2", "head")))))
    assert "net_1/stage_0…2" in folded


def test_a_value_the_function_captured_is_no_input() -> None:
    """A SavedModel's function takes its inputs, then what it captured: variables and
    constants (a normalization's mean); a constant is no input of the model."""
    top = BodyFactory("top")
    images = top.arg("images")
    mean = top.arg("normalization_mean")
    kernel = top.arg("dense/kernel", "resource")
    centred = top.op("model/normalization/sub", "Sub", images, mean)
    read = top.op("model/dense/ReadVariableOp", "ReadVariableOp", kernel)
    loss = top.op("loss", "Sum", top.op("model/dense/MatMul", "MatMul", centred, read))
    prog = program(top.body(loss), loss)
    prog.variables = [v for v in prog.variables if v.name == "dense/kernel"]
    prog.inputs = 1
    assert set(_by_label(_mapped(prog))) == {"images", "model/normalization", "model/dense", "loss"}
    prog.inputs = None  # not known: any argument may be an input
    assert "normalization_mean" in _by_label(_mapped(prog))


def test_a_cut_in_the_model_s_own_scope_sits_between_its_layers() -> None:
    """The cut is never passed through, so the model's scope is a node; the layers beside it
    stay nodes of their own (none of them joins the model's node)."""
    top = BodyFactory("top")
    x = top.op("images", "Placeholder")
    k1, k2 = top.arg("conv1/kernel", "resource"), top.arg("conv2/kernel", "resource")
    x = top.op("model/conv1/Conv2D", "Conv2D", x, top.op("model/conv1/Read", "ReadVariableOp", k1))
    x = top.op("model/relu1/Relu", "Relu", x)
    x = top.op("model/StopGradient", "StopGradient", x)
    x = top.op("model/conv2/Conv2D", "Conv2D", x, top.op("model/conv2/Read", "ReadVariableOp", k2))
    loss = top.op("loss", "Sum", top.op("model/relu2/Relu", "Relu", x))
    drawn = _mapped(program(top.body(loss), loss))
    assert _edges(drawn) == {
        ("images", "model/conv1"),
        ("model/conv1", "model/relu1"),
        ("model/relu1", "model"),
        ("model", "model/conv2"),
        ("model/conv2", "model/relu2"),
        ("model/relu2", "loss"),
    }
    (cut,) = drawn.cuts
    ids = _by_label(drawn)
    assert cut.edge == MapEdge(ids["model/relu1"], ids["model"])


def test_a_cut_on_a_residual_stream_sits_on_the_edge_from_the_nearest_block() -> None:
    top = BodyFactory("top")
    x = top.op("images", "Placeholder")
    for number, block in enumerate(("stage_0", "stage_1")):
        w = top.arg(f"{block}/kernel", "resource")
        read = top.op(f"net_1/{block}/ReadVariableOp", "ReadVariableOp", w)
        x = top.op(
            f"net_1/Add_{number}", "AddV2", x, top.op(f"net_1/{block}/Conv2D", "Conv2D", x, read)
        )
    x = top.op("net_1/StopGradient", "StopGradient", x)
    kernel = top.arg("head/kernel", "resource")
    read = top.op("net_1/head/ReadVariableOp", "ReadVariableOp", kernel)
    loss = top.op("loss", "Sum", top.op("net_1/head/MatMul", "MatMul", x, read))
    drawn = _mapped(program(top.body(loss), loss))
    ids = _by_label(drawn)
    (cut,) = drawn.cuts
    assert cut.edge == MapEdge(ids["net_1/stage_0…1"], ids["net_1"])  # not from the images
    assert MapEdge(ids["images"], ids["net_1"]) not in drawn.edges


def test_layers_run_as_functions_beside_the_model_s_own_add_make_a_chain() -> None:
    """A SavedModel of a Keras 2 model: the model's function calls each layer's function under
    the layer's scope, and adds their outputs itself."""
    layers = []
    for name in ("dense_fn", "dense_1_fn"):
        layer = BodyFactory(name)
        a, w = layer.arg("x"), layer.arg("w", "resource")
        read = layer.op("MatMul/ReadVariableOp", "ReadVariableOp", w)
        layers.append(layer.body(layer.op("MatMul", "MatMul", a, read)))
    model = BodyFactory("model_fn")
    x, w1, w2 = model.arg("x"), model.arg("w1", "resource"), model.arg("w2", "resource")
    call = "StatefulPartitionedCall"
    first = model.op(f"dense/{call}", call, x, w1, f=("dense_fn",))
    added = model.op("add", "AddV2", x, first)
    second = model.op(f"dense_1/{call}", call, added, w2, f=("dense_1_fn",))
    top = BodyFactory("top")
    images = top.op("images", "Placeholder")
    k1, k2 = top.arg("dense/kernel", "resource"), top.arg("dense_1/kernel", "resource")
    output = top.op(f"model/{call}", call, images, k1, k2, f=("model_fn",))
    loss = top.op("loss", "Sum", output)
    prog = program(top.body(loss), loss, model.body(second), *layers)
    drawn = _mapped(prog)
    assert "model" not in _by_label(drawn)
    assert ("images", "model/dense") in _edges(drawn)
    assert ("model/dense", "model/dense_1") in _edges(drawn)


def test_a_long_residual_network_is_mapped() -> None:
    """2,000 blocks on one residual stream: every block's data reaches every later one."""
    drawn = _mapped(_residual(tuple(f"block_{i}" for i in range(2000))))
    assert len(drawn.nodes) <= 60
    assert sum(len(node.variables) for node in drawn.nodes) == 2000
