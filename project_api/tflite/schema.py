"""Facts of the TFLite flatbuffer schema as data: the one place the emitter learns them.

Everything here is read off ``tensorflow/lite/schema/schema.fbs`` (schema version 3, as of
``STABLEHLO_CASE = 209``): the ``BuiltinOperator`` enum (name <-> number), the ``TensorType``
enum, the other enums the options use, the ``BuiltinOptions`` union (its member order is the
union tag), every options table (field slot, name, type, default) with the operators that use
it, and the structural tables (``Model``, ``SubGraph``, ``Tensor``, ``Operator``, ...). The
reader (:mod:`.tflite_reader`) and the model builder (:mod:`.builder`) both go through these
tables, so reading or writing any operator's options is a lookup, never per-operator code.

Tables are written in schema.fbs's own field syntax, one table per entry, fields in slot order
(a table's field ``i`` sits at vtable slot ``4 + 2*i``): ``name:type[=default]``, ``[T]`` a
vector, ``(deprecated)`` a field that keeps its slot but is no longer written. A union field
(``builtin_options:BuiltinOptions``) takes two slots, ``<name>_type`` (the tag, ubyte) then the
table. ``tests/tflite/test_emit_schema.py`` checks every slot, type and default against the generated
readers of the ``tflite`` and ``tflite_micro`` packages.

Adding a table: copy its fields from schema.fbs into :data:`_OPTIONS_TEXT` (in union order) or
:data:`_TABLES_TEXT`, with the operators that take it in parentheses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

# --- enums ----------------------------------------------------------------------------------

#: ``TensorType``: code -> our dtype name (the schema's name in lower case, as :mod:`dtypes`
#: spells it: ``float32``, ``int8``, ``bool``, ``resource``, ...).
TENSOR_TYPES: dict[int, str] = {
    0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string", 6: "bool",
    7: "int16", 8: "complex64", 9: "int8", 10: "float64", 11: "complex128", 12: "uint64",
    13: "resource", 14: "variant", 15: "uint32", 16: "uint16", 17: "int4", 18: "bfloat16",
    19: "int2", 20: "uint4", 21: "float8_e4m3fn", 22: "float8_e5m2",
}
#: dtype name -> ``TensorType`` code.
TENSOR_TYPE_CODES: dict[str, int] = {name: code for code, name in TENSOR_TYPES.items()}
#: The tensor types whose data the emitter can hold (numpy dtype, little-endian in the file).
NUMPY_TYPES: dict[str, Any] = {
    "float32": np.float32, "float16": np.float16, "float64": np.float64, "int8": np.int8,
    "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
    "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "bool": np.bool_,
}

#: The enums that fields of the tables below take, name -> {member: value}. ``TensorType``
#: fields decode to dtype names instead (see :data:`TENSOR_TYPES`).
ENUMS: dict[str, dict[str, int]] = {
    "Padding": {"SAME": 0, "VALID": 1},
    "ActivationFunctionType": {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3, "TANH": 4,
                               "SIGN_BIT": 5},
    "FullyConnectedOptionsWeightsFormat": {"DEFAULT": 0, "SHUFFLED4x16INT8": 1},
    "LSTMKernelType": {"FULL": 0, "BASIC": 1},
    "LSHProjectionType": {"UNKNOWN": 0, "SPARSE": 1, "DENSE": 2},
    "CombinerType": {"SUM": 0, "MEAN": 1, "SQRTN": 2},
    "MirrorPadMode": {"REFLECT": 0, "SYMMETRIC": 1},
    "ReduceWindowFunction": {"UNSUPPORTED": 0, "ADD": 1, "MUL": 2, "MINIMUM": 3, "MAXIMUM": 4,
                             "ALL": 5, "ANY": 6},
    "CustomOptionsFormat": {"FLEXBUFFERS": 0},
    "DimensionType": {"DENSE": 0, "SPARSE_CSR": 1},
}
#: The storage type of each enum (``TensorType`` and the small enums are bytes).
_ENUM_STORAGE = {"TensorType": "byte", "BuiltinOperator": "int", "ReduceWindowFunction": "int"}

# --- BuiltinOperator --------------------------------------------------------------------------

_OPERATORS_TEXT = """
ADD=0 AVERAGE_POOL_2D=1 CONCATENATION=2 CONV_2D=3 DEPTHWISE_CONV_2D=4 DEPTH_TO_SPACE=5
DEQUANTIZE=6 EMBEDDING_LOOKUP=7 FLOOR=8 FULLY_CONNECTED=9 HASHTABLE_LOOKUP=10
L2_NORMALIZATION=11 L2_POOL_2D=12 LOCAL_RESPONSE_NORMALIZATION=13 LOGISTIC=14 LSH_PROJECTION=15
LSTM=16 MAX_POOL_2D=17 MUL=18 RELU=19 RELU_N1_TO_1=20 RELU6=21 RESHAPE=22 RESIZE_BILINEAR=23
RNN=24 SOFTMAX=25 SPACE_TO_DEPTH=26 SVDF=27 TANH=28 CONCAT_EMBEDDINGS=29 SKIP_GRAM=30 CALL=31
CUSTOM=32 EMBEDDING_LOOKUP_SPARSE=33 PAD=34 UNIDIRECTIONAL_SEQUENCE_RNN=35 GATHER=36
BATCH_TO_SPACE_ND=37 SPACE_TO_BATCH_ND=38 TRANSPOSE=39 MEAN=40 SUB=41 DIV=42 SQUEEZE=43
UNIDIRECTIONAL_SEQUENCE_LSTM=44 STRIDED_SLICE=45 BIDIRECTIONAL_SEQUENCE_RNN=46 EXP=47
TOPK_V2=48 SPLIT=49 LOG_SOFTMAX=50 DELEGATE=51 BIDIRECTIONAL_SEQUENCE_LSTM=52 CAST=53 PRELU=54
MAXIMUM=55 ARG_MAX=56 MINIMUM=57 LESS=58 NEG=59 PADV2=60 GREATER=61 GREATER_EQUAL=62
LESS_EQUAL=63 SELECT=64 SLICE=65 SIN=66 TRANSPOSE_CONV=67 SPARSE_TO_DENSE=68 TILE=69
EXPAND_DIMS=70 EQUAL=71 NOT_EQUAL=72 LOG=73 SUM=74 SQRT=75 RSQRT=76 SHAPE=77 POW=78 ARG_MIN=79
FAKE_QUANT=80 REDUCE_PROD=81 REDUCE_MAX=82 PACK=83 LOGICAL_OR=84 ONE_HOT=85 LOGICAL_AND=86
LOGICAL_NOT=87 UNPACK=88 REDUCE_MIN=89 FLOOR_DIV=90 REDUCE_ANY=91 SQUARE=92 ZEROS_LIKE=93
FILL=94 FLOOR_MOD=95 RANGE=96 RESIZE_NEAREST_NEIGHBOR=97 LEAKY_RELU=98 SQUARED_DIFFERENCE=99
MIRROR_PAD=100 ABS=101 SPLIT_V=102 UNIQUE=103 CEIL=104 REVERSE_V2=105 ADD_N=106 GATHER_ND=107
COS=108 WHERE=109 RANK=110 ELU=111 REVERSE_SEQUENCE=112 MATRIX_DIAG=113 QUANTIZE=114
MATRIX_SET_DIAG=115 ROUND=116 HARD_SWISH=117 IF=118 WHILE=119 NON_MAX_SUPPRESSION_V4=120
NON_MAX_SUPPRESSION_V5=121 SCATTER_ND=122 SELECT_V2=123 DENSIFY=124 SEGMENT_SUM=125
BATCH_MATMUL=126 PLACEHOLDER_FOR_GREATER_OP_CODES=127 CUMSUM=128 CALL_ONCE=129 BROADCAST_TO=130
RFFT2D=131 CONV_3D=132 IMAG=133 REAL=134 COMPLEX_ABS=135 HASHTABLE=136 HASHTABLE_FIND=137
HASHTABLE_IMPORT=138 HASHTABLE_SIZE=139 REDUCE_ALL=140 CONV_3D_TRANSPOSE=141 VAR_HANDLE=142
READ_VARIABLE=143 ASSIGN_VARIABLE=144 BROADCAST_ARGS=145 RANDOM_STANDARD_NORMAL=146
BUCKETIZE=147 RANDOM_UNIFORM=148 MULTINOMIAL=149 GELU=150 DYNAMIC_UPDATE_SLICE=151
RELU_0_TO_1=152 UNSORTED_SEGMENT_PROD=153 UNSORTED_SEGMENT_MAX=154 UNSORTED_SEGMENT_SUM=155
ATAN2=156 UNSORTED_SEGMENT_MIN=157 SIGN=158 BITCAST=159 BITWISE_XOR=160 RIGHT_SHIFT=161
STABLEHLO_LOGISTIC=162 STABLEHLO_ADD=163 STABLEHLO_DIVIDE=164 STABLEHLO_MULTIPLY=165
STABLEHLO_MAXIMUM=166 STABLEHLO_RESHAPE=167 STABLEHLO_CLAMP=168 STABLEHLO_CONCATENATE=169
STABLEHLO_BROADCAST_IN_DIM=170 STABLEHLO_CONVOLUTION=171 STABLEHLO_SLICE=172
STABLEHLO_CUSTOM_CALL=173 STABLEHLO_REDUCE=174 STABLEHLO_ABS=175 STABLEHLO_AND=176
STABLEHLO_COSINE=177 STABLEHLO_EXPONENTIAL=178 STABLEHLO_FLOOR=179 STABLEHLO_LOG=180
STABLEHLO_MINIMUM=181 STABLEHLO_NEGATE=182 STABLEHLO_OR=183 STABLEHLO_POWER=184
STABLEHLO_REMAINDER=185 STABLEHLO_RSQRT=186 STABLEHLO_SELECT=187 STABLEHLO_SUBTRACT=188
STABLEHLO_TANH=189 STABLEHLO_SCATTER=190 STABLEHLO_COMPARE=191 STABLEHLO_CONVERT=192
STABLEHLO_DYNAMIC_SLICE=193 STABLEHLO_DYNAMIC_UPDATE_SLICE=194 STABLEHLO_PAD=195
STABLEHLO_IOTA=196 STABLEHLO_DOT_GENERAL=197 STABLEHLO_REDUCE_WINDOW=198 STABLEHLO_SORT=199
STABLEHLO_WHILE=200 STABLEHLO_GATHER=201 STABLEHLO_TRANSPOSE=202 DILATE=203
STABLEHLO_RNG_BIT_GENERATOR=204 REDUCE_WINDOW=205 STABLEHLO_COMPOSITE=206
STABLEHLO_SHIFT_LEFT=207 STABLEHLO_CBRT=208 STABLEHLO_CASE=209
"""

#: ``BuiltinOperator``: name -> code.
BUILTIN_OPERATORS: dict[str, int] = {
    name: int(code) for name, code in (item.split("=") for item in _OPERATORS_TEXT.split())}
#: ``BuiltinOperator``: code -> name.
OPERATOR_NAMES: dict[int, str] = {code: name for name, code in BUILTIN_OPERATORS.items()}
#: The code of custom operators (their name is the OperatorCode's ``custom_code``).
CUSTOM = BUILTIN_OPERATORS["CUSTOM"]


def operator_name(code: int) -> str | None:
    """The ``BuiltinOperator`` name of ``code``, or None for a code newer than this schema."""
    return OPERATOR_NAMES.get(code)


# --- tables ---------------------------------------------------------------------------------

#: Scalar storage types: schema.fbs spelling -> (struct format, size).
SCALARS: dict[str, tuple[str, int]] = {
    "bool": ("<B", 1), "byte": ("<b", 1), "ubyte": ("<B", 1), "short": ("<h", 2),
    "ushort": ("<H", 2), "int": ("<i", 4), "uint": ("<I", 4), "long": ("<q", 8),
    "ulong": ("<Q", 8), "float": ("<f", 4), "double": ("<d", 8),
    "int32": ("<i", 4), "int8": ("<b", 1), "uint8": ("<B", 1),
}
#: Union types: a field of one of these takes two slots (``<field>_type``, then the table).
UNIONS = frozenset({"BuiltinOptions", "BuiltinOptions2", "QuantizationDetails",
                    "SparseIndexVector"})


@dataclass(frozen=True)
class Field:
    """One field of a table.

    ``kind`` is ``"scalar"`` (``type`` a schema.fbs scalar), ``"enum"`` (``type`` an enum
    name; the value is the member's name, a dtype name for ``TensorType``), ``"string"``,
    ``"vector"`` (``type`` the element type: a scalar, ``string`` or a table), ``"table"``,
    ``"union_type"`` (the tag of union ``type``) or ``"union"``. ``default`` is the decoded
    default (the member name for enums, None for the others)."""

    slot: int
    name: str
    kind: str
    type: str
    default: Any = None
    deprecated: bool = False

    @property
    def storage(self) -> str:
        """The scalar storage type of a scalar, enum or union-tag field."""
        if self.kind == "scalar":
            return self.type
        if self.kind == "enum":
            return _ENUM_STORAGE.get(self.type, "byte")
        if self.kind == "union_type":
            return "ubyte"
        raise ValueError(f"field {self.name} of kind {self.kind} has no scalar storage")

    def encode(self, value: Any) -> int | float:
        """The stored scalar of a decoded ``value`` (enum member name -> its number)."""
        if self.kind == "enum":
            if self.type == "TensorType":
                return TENSOR_TYPE_CODES[value]
            if self.type == "BuiltinOperator":
                return BUILTIN_OPERATORS[value]
            return ENUMS[self.type][value]
        if self.type == "bool":
            return 1 if value else 0
        return value

    def decode(self, raw: int | float) -> Any:
        """The decoded value of a stored scalar (an unknown enum value reads ``Type(n)``)."""
        if self.kind == "enum":
            if self.type == "TensorType":
                return TENSOR_TYPES.get(int(raw), f"TensorType({int(raw)})")
            if self.type == "BuiltinOperator":
                return OPERATOR_NAMES.get(int(raw), f"BuiltinOperator({int(raw)})")
            names = {v: k for k, v in ENUMS[self.type].items()}
            return names.get(int(raw), f"{self.type}({int(raw)})")
        if self.type == "bool":
            return bool(raw)
        if self.type in ("float", "double"):
            return float(raw)
        return int(raw)


def _default(kind: str, typ: str, text: str | None) -> Any:
    if kind == "scalar":
        if typ == "bool":
            return text == "true"
        if typ in ("float", "double"):
            return float(text) if text else 0.0
        return int(text) if text else 0
    if kind == "enum":
        if typ == "TensorType":
            return TENSOR_TYPES[0] if text is None else text.lower()
        if typ == "BuiltinOperator":
            return OPERATOR_NAMES[0] if text is None else text
        members = ENUMS[typ]
        if text is None:
            return next(name for name, value in members.items() if value == 0)
        return text
    return None


_FIELD_RE = re.compile(r"(\w+):(\[?)(\w+)\]?(?:=([\w.\-]+))?(\(deprecated\))?$")


def _parse_fields(text: str) -> tuple[Field, ...]:
    fields: list[Field] = []
    for item in text.split():
        m = _FIELD_RE.match(item)
        if m is None:
            raise ValueError(f"schema: cannot parse field {item!r}")
        name, vec, typ, default, deprecated = m.groups()
        slot = len(fields)
        if vec:
            fields.append(Field(slot, name, "vector", typ, None, bool(deprecated)))
        elif typ in UNIONS:
            fields.append(Field(slot, f"{name}_type", "union_type", typ, 0))
            fields.append(Field(slot + 1, name, "union", typ))
        elif typ == "string":
            fields.append(Field(slot, name, "string", typ, None, bool(deprecated)))
        elif typ in SCALARS:
            fields.append(Field(slot, name, "scalar", typ, _default("scalar", typ, default),
                                bool(deprecated)))
        elif typ in ENUMS or typ in _ENUM_STORAGE:
            fields.append(Field(slot, name, "enum", typ, _default("enum", typ, default),
                                bool(deprecated)))
        else:
            fields.append(Field(slot, name, "table", typ, None, bool(deprecated)))
    return tuple(fields)


def _parse_tables(text: str) -> tuple[dict[str, tuple[Field, ...]], dict[str, tuple[str, ...]]]:
    """``Name (OP OP ...): fields`` entries (continuation lines indented) -> tables, users."""
    entries: list[str] = []
    for line in text.strip("\n").splitlines():
        if line.startswith(" ") and entries:
            entries[-1] += " " + line.strip()
        elif line.strip():
            entries.append(line.strip())
    tables: dict[str, tuple[Field, ...]] = {}
    users: dict[str, tuple[str, ...]] = {}
    for entry in entries:
        m = re.match(r"(\w+)\s*(?:\(([\w\s]*)\))?:(.*)$", entry)
        if m is None:
            raise ValueError(f"schema: cannot parse table {entry!r}")
        tables[m.group(1)] = _parse_fields(m.group(3))
        users[m.group(1)] = tuple((m.group(2) or "").split())
    return tables, users


#: The ``BuiltinOptions`` union, in member order (a member's union tag is its position + 1),
#: each with the operators whose options it holds.
_OPTIONS_TEXT = """
Conv2DOptions (CONV_2D): padding:Padding stride_w:int stride_h:int
    fused_activation_function:ActivationFunctionType dilation_w_factor:int=1
    dilation_h_factor:int=1 quantized_bias_type:TensorType
DepthwiseConv2DOptions (DEPTHWISE_CONV_2D): padding:Padding stride_w:int stride_h:int
    depth_multiplier:int fused_activation_function:ActivationFunctionType
    dilation_w_factor:int=1 dilation_h_factor:int=1
ConcatEmbeddingsOptions (CONCAT_EMBEDDINGS): num_channels:int num_columns_per_channel:[int]
    embedding_dim_per_channel:[int]
LSHProjectionOptions (LSH_PROJECTION): type:LSHProjectionType
Pool2DOptions (AVERAGE_POOL_2D L2_POOL_2D MAX_POOL_2D): padding:Padding stride_w:int
    stride_h:int filter_width:int filter_height:int
    fused_activation_function:ActivationFunctionType
SVDFOptions (SVDF): rank:int fused_activation_function:ActivationFunctionType
    asymmetric_quantize_inputs:bool
RNNOptions (RNN): fused_activation_function:ActivationFunctionType
    asymmetric_quantize_inputs:bool
FullyConnectedOptions (FULLY_CONNECTED): fused_activation_function:ActivationFunctionType
    weights_format:FullyConnectedOptionsWeightsFormat=DEFAULT keep_num_dims:bool
    asymmetric_quantize_inputs:bool quantized_bias_type:TensorType quant_spec:[ubyte]
SoftmaxOptions (SOFTMAX): beta:float
ConcatenationOptions (CONCATENATION): axis:int fused_activation_function:ActivationFunctionType
AddOptions (ADD): fused_activation_function:ActivationFunctionType pot_scale_int16:bool=true
L2NormOptions (L2_NORMALIZATION): fused_activation_function:ActivationFunctionType
LocalResponseNormalizationOptions (LOCAL_RESPONSE_NORMALIZATION): radius:int bias:float
    alpha:float beta:float
LSTMOptions (LSTM): fused_activation_function:ActivationFunctionType cell_clip:float
    proj_clip:float kernel_type:LSTMKernelType=FULL asymmetric_quantize_inputs:bool
ResizeBilinearOptions (RESIZE_BILINEAR): new_height:int(deprecated) new_width:int(deprecated)
    align_corners:bool half_pixel_centers:bool
CallOptions (CALL): subgraph:uint
ReshapeOptions (RESHAPE): new_shape:[int]
SkipGramOptions (SKIP_GRAM): ngram_size:int max_skip_size:int include_all_ngrams:bool
SpaceToDepthOptions (SPACE_TO_DEPTH): block_size:int
EmbeddingLookupSparseOptions (EMBEDDING_LOOKUP_SPARSE): combiner:CombinerType
MulOptions (MUL): fused_activation_function:ActivationFunctionType
PadOptions (PAD):
GatherOptions (GATHER): axis:int batch_dims:int=0
BatchToSpaceNDOptions (BATCH_TO_SPACE_ND):
SpaceToBatchNDOptions (SPACE_TO_BATCH_ND):
TransposeOptions (TRANSPOSE):
ReducerOptions (MEAN SUM REDUCE_PROD REDUCE_MAX REDUCE_MIN REDUCE_ANY REDUCE_ALL):
    keep_dims:bool
SubOptions (SUB): fused_activation_function:ActivationFunctionType pot_scale_int16:bool=true
DivOptions (DIV): fused_activation_function:ActivationFunctionType
SqueezeOptions (SQUEEZE): squeeze_dims:[int]
SequenceRNNOptions (UNIDIRECTIONAL_SEQUENCE_RNN): time_major:bool
    fused_activation_function:ActivationFunctionType asymmetric_quantize_inputs:bool
StridedSliceOptions (STRIDED_SLICE): begin_mask:int end_mask:int ellipsis_mask:int
    new_axis_mask:int shrink_axis_mask:int offset:bool
ExpOptions (EXP):
TopKV2Options (TOPK_V2):
SplitOptions (SPLIT): num_splits:int
LogSoftmaxOptions (LOG_SOFTMAX):
CastOptions (CAST): in_data_type:TensorType out_data_type:TensorType
DequantizeOptions (DEQUANTIZE):
MaximumMinimumOptions (MAXIMUM MINIMUM):
ArgMaxOptions (ARG_MAX): output_type:TensorType
LessOptions (LESS):
NegOptions (NEG):
PadV2Options (PADV2):
GreaterOptions (GREATER):
GreaterEqualOptions (GREATER_EQUAL):
LessEqualOptions (LESS_EQUAL):
SelectOptions (SELECT):
SliceOptions (SLICE):
TransposeConvOptions (TRANSPOSE_CONV): padding:Padding stride_w:int stride_h:int
    fused_activation_function:ActivationFunctionType=NONE quantized_bias_type:TensorType
SparseToDenseOptions (SPARSE_TO_DENSE): validate_indices:bool
TileOptions (TILE):
ExpandDimsOptions (EXPAND_DIMS):
EqualOptions (EQUAL):
NotEqualOptions (NOT_EQUAL):
ShapeOptions (SHAPE): out_type:TensorType
PowOptions (POW):
ArgMinOptions (ARG_MIN): output_type:TensorType
FakeQuantOptions (FAKE_QUANT): min:float max:float num_bits:int narrow_range:bool
PackOptions (PACK): values_count:int axis:int
LogicalOrOptions (LOGICAL_OR):
OneHotOptions (ONE_HOT): axis:int
LogicalAndOptions (LOGICAL_AND):
LogicalNotOptions (LOGICAL_NOT):
UnpackOptions (UNPACK): num:int axis:int
FloorDivOptions (FLOOR_DIV):
SquareOptions (SQUARE):
ZerosLikeOptions (ZEROS_LIKE):
FillOptions (FILL):
BidirectionalSequenceLSTMOptions (BIDIRECTIONAL_SEQUENCE_LSTM):
    fused_activation_function:ActivationFunctionType cell_clip:float proj_clip:float
    merge_outputs:bool time_major:bool=true asymmetric_quantize_inputs:bool
BidirectionalSequenceRNNOptions (BIDIRECTIONAL_SEQUENCE_RNN): time_major:bool
    fused_activation_function:ActivationFunctionType merge_outputs:bool
    asymmetric_quantize_inputs:bool
UnidirectionalSequenceLSTMOptions (UNIDIRECTIONAL_SEQUENCE_LSTM):
    fused_activation_function:ActivationFunctionType cell_clip:float proj_clip:float
    time_major:bool asymmetric_quantize_inputs:bool diagonal_recurrent_tensors:bool
FloorModOptions (FLOOR_MOD):
RangeOptions (RANGE):
ResizeNearestNeighborOptions (RESIZE_NEAREST_NEIGHBOR): align_corners:bool
    half_pixel_centers:bool
LeakyReluOptions (LEAKY_RELU): alpha:float
SquaredDifferenceOptions (SQUARED_DIFFERENCE):
MirrorPadOptions (MIRROR_PAD): mode:MirrorPadMode
AbsOptions (ABS):
SplitVOptions (SPLIT_V): num_splits:int
UniqueOptions (UNIQUE): idx_out_type:TensorType=INT32
ReverseV2Options (REVERSE_V2):
AddNOptions (ADD_N):
GatherNdOptions (GATHER_ND):
CosOptions (COS):
WhereOptions (WHERE):
RankOptions (RANK):
ReverseSequenceOptions (REVERSE_SEQUENCE): seq_dim:int batch_dim:int=0
MatrixDiagOptions (MATRIX_DIAG):
QuantizeOptions (QUANTIZE):
MatrixSetDiagOptions (MATRIX_SET_DIAG):
HardSwishOptions (HARD_SWISH):
IfOptions (IF): then_subgraph_index:int else_subgraph_index:int
WhileOptions (WHILE): cond_subgraph_index:int body_subgraph_index:int
DepthToSpaceOptions (DEPTH_TO_SPACE): block_size:int
NonMaxSuppressionV4Options (NON_MAX_SUPPRESSION_V4):
NonMaxSuppressionV5Options (NON_MAX_SUPPRESSION_V5):
ScatterNdOptions (SCATTER_ND):
SelectV2Options (SELECT_V2):
DensifyOptions (DENSIFY):
SegmentSumOptions (SEGMENT_SUM):
BatchMatMulOptions (BATCH_MATMUL): adj_x:bool adj_y:bool asymmetric_quantize_inputs:bool
CumsumOptions (CUMSUM): exclusive:bool reverse:bool
CallOnceOptions (CALL_ONCE): init_subgraph_index:int
BroadcastToOptions (BROADCAST_TO):
Rfft2dOptions (RFFT2D):
Conv3DOptions (CONV_3D CONV_3D_TRANSPOSE): padding:Padding stride_d:int stride_w:int
    stride_h:int fused_activation_function:ActivationFunctionType dilation_d_factor:int=1
    dilation_w_factor:int=1 dilation_h_factor:int=1
HashtableOptions (HASHTABLE): table_id:int key_dtype:TensorType value_dtype:TensorType
HashtableFindOptions (HASHTABLE_FIND):
HashtableImportOptions (HASHTABLE_IMPORT):
HashtableSizeOptions (HASHTABLE_SIZE):
VarHandleOptions (VAR_HANDLE): container:string shared_name:string
ReadVariableOptions (READ_VARIABLE):
AssignVariableOptions (ASSIGN_VARIABLE):
RandomOptions (RANDOM_STANDARD_NORMAL RANDOM_UNIFORM MULTINOMIAL): seed:long seed2:long
BucketizeOptions (BUCKETIZE): boundaries:[float]
GeluOptions (GELU): approximate:bool
DynamicUpdateSliceOptions (DYNAMIC_UPDATE_SLICE):
UnsortedSegmentProdOptions (UNSORTED_SEGMENT_PROD):
UnsortedSegmentMaxOptions (UNSORTED_SEGMENT_MAX):
UnsortedSegmentMinOptions (UNSORTED_SEGMENT_MIN):
UnsortedSegmentSumOptions (UNSORTED_SEGMENT_SUM):
ATan2Options (ATAN2):
SignOptions (SIGN):
BitcastOptions (BITCAST):
BitwiseXorOptions (BITWISE_XOR):
RightShiftOptions (RIGHT_SHIFT):
"""

#: The structural tables the reader and the builder walk.
_TABLES_TEXT = """
Model: version:uint operator_codes:[OperatorCode] subgraphs:[SubGraph] description:string
    buffers:[Buffer] metadata_buffer:[int] metadata:[Metadata] signature_defs:[SignatureDef]
    external_buffer_groups:[ExternalBufferGroup] external_buffers:[ExternalBuffer]
OperatorCode: deprecated_builtin_code:byte custom_code:string version:int=1
    builtin_code:BuiltinOperator
SubGraph: tensors:[Tensor] inputs:[int] outputs:[int] operators:[Operator] name:string
    debug_metadata_index:int=-1
Tensor: shape:[int] type:TensorType buffer:uint name:string
    quantization:QuantizationParameters is_variable:bool sparsity:SparsityParameters
    shape_signature:[int] has_rank:bool variant_tensors:[VariantSubType] external_buffer:uint
Operator: opcode_index:uint inputs:[int] outputs:[int] builtin_options:BuiltinOptions
    custom_options:[ubyte] custom_options_format:CustomOptionsFormat
    mutating_variable_inputs:[bool] intermediates:[int] large_custom_options_offset:ulong
    large_custom_options_size:ulong builtin_options_2:BuiltinOptions2
    debug_metadata_index:int=-1
Buffer: data:[ubyte] offset:ulong size:ulong
QuantizationParameters: min:[float] max:[float] scale:[float] zero_point:[long]
    details:QuantizationDetails quantized_dimension:int
Metadata: name:string buffer:uint
SignatureDef: inputs:[TensorMap] outputs:[TensorMap] signature_key:string
    deprecated_tag:string(deprecated) subgraph_index:uint
TensorMap: name:string tensor_index:uint
"""

#: Options tables: name -> fields in slot order.
OPTIONS: dict[str, tuple[Field, ...]]
#: Options table -> the operators whose options it holds.
OPTIONS_USERS: dict[str, tuple[str, ...]]
OPTIONS, OPTIONS_USERS = _parse_tables(_OPTIONS_TEXT)
#: ``BuiltinOptions`` member name -> union tag (0 is NONE).
OPTIONS_TAGS: dict[str, int] = {name: i + 1 for i, name in enumerate(OPTIONS)}
#: union tag -> ``BuiltinOptions`` member name.
OPTIONS_BY_TAG: dict[int, str] = {tag: name for name, tag in OPTIONS_TAGS.items()}
#: Operator name -> the options table of its builtin options.
OPERATOR_OPTIONS: dict[str, str] = {op: table for table, ops in OPTIONS_USERS.items()
                                    for op in ops}
#: Structural tables: name -> fields in slot order.
TABLES: dict[str, tuple[Field, ...]] = _parse_tables(_TABLES_TEXT)[0]


def table_fields(table: str) -> dict[str, Field]:
    """The fields of an options or structural ``table`` by name (KeyError if unknown)."""
    fields = OPTIONS[table] if table in OPTIONS else TABLES[table]
    return {f.name: f for f in fields}


def defaults(table: str) -> dict[str, Any]:
    """The decoded default of every (not deprecated) field of options ``table``: what an
    operator's options are when the model stores no options table (an absent vector or
    string is None)."""
    return {f.name: f.default for f in OPTIONS[table] if not f.deprecated}
