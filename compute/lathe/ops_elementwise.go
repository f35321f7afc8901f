package lathe

/*
#include "lathe.h"
*/
import "C"

import "github.com/gomlx/compute"

// The one-operand and two-operand ops forward to lathe_unary / lathe_binary with the op of
// lathe_ops.def; reductions to lathe_reduce.
func (f *Function) Abs(x compute.Value) (compute.Value, error) {
	return f.unary("Abs", C.LATHE_OP_ABS, x)
}
func (f *Function) Neg(x compute.Value) (compute.Value, error) {
	return f.unary("Neg", C.LATHE_OP_NEG, x)
}
func (f *Function) Sign(x compute.Value) (compute.Value, error) {
	return f.unary("Sign", C.LATHE_OP_SIGN, x)
}
func (f *Function) Ceil(x compute.Value) (compute.Value, error) {
	return f.unary("Ceil", C.LATHE_OP_CEIL, x)
}
func (f *Function) Floor(x compute.Value) (compute.Value, error) {
	return f.unary("Floor", C.LATHE_OP_FLOOR, x)
}
func (f *Function) Round(x compute.Value) (compute.Value, error) {
	return f.unary("Round", C.LATHE_OP_ROUND, x)
}
func (f *Function) Sqrt(x compute.Value) (compute.Value, error) {
	return f.unary("Sqrt", C.LATHE_OP_SQRT, x)
}
func (f *Function) Rsqrt(x compute.Value) (compute.Value, error) {
	return f.unary("Rsqrt", C.LATHE_OP_RSQRT, x)
}
func (f *Function) Exp(x compute.Value) (compute.Value, error) {
	return f.unary("Exp", C.LATHE_OP_EXP, x)
}
func (f *Function) Expm1(x compute.Value) (compute.Value, error) {
	return f.unary("Expm1", C.LATHE_OP_EXPM1, x)
}
func (f *Function) Log(x compute.Value) (compute.Value, error) {
	return f.unary("Log", C.LATHE_OP_LOG, x)
}
func (f *Function) Log1p(x compute.Value) (compute.Value, error) {
	return f.unary("Log1p", C.LATHE_OP_LOG1P, x)
}
func (f *Function) Logistic(x compute.Value) (compute.Value, error) {
	return f.unary("Logistic", C.LATHE_OP_LOGISTIC, x)
}
func (f *Function) Tanh(x compute.Value) (compute.Value, error) {
	return f.unary("Tanh", C.LATHE_OP_TANH, x)
}
func (f *Function) Sin(x compute.Value) (compute.Value, error) {
	return f.unary("Sin", C.LATHE_OP_SIN, x)
}
func (f *Function) Cos(x compute.Value) (compute.Value, error) {
	return f.unary("Cos", C.LATHE_OP_COS, x)
}
func (f *Function) Erf(x compute.Value) (compute.Value, error) {
	return f.unary("Erf", C.LATHE_OP_ERF, x)
}
func (f *Function) IsFinite(x compute.Value) (compute.Value, error) {
	return f.unary("IsFinite", C.LATHE_OP_IS_FINITE, x)
}
func (f *Function) IsNaN(x compute.Value) (compute.Value, error) {
	return f.unary("IsNaN", C.LATHE_OP_IS_NAN, x)
}
func (f *Function) LogicalNot(x compute.Value) (compute.Value, error) {
	return f.unary("LogicalNot", C.LATHE_OP_LOGICAL_NOT, x)
}
func (f *Function) BitwiseNot(x compute.Value) (compute.Value, error) {
	return f.unary("BitwiseNot", C.LATHE_OP_BITWISE_NOT, x)
}
func (f *Function) BitCount(x compute.Value) (compute.Value, error) {
	return f.unary("BitCount", C.LATHE_OP_BIT_COUNT, x)
}
func (f *Function) Clz(x compute.Value) (compute.Value, error) {
	return f.unary("Clz", C.LATHE_OP_CLZ, x)
}
func (f *Function) Real(x compute.Value) (compute.Value, error) {
	return f.unary("Real", C.LATHE_OP_REAL, x)
}
func (f *Function) Imag(x compute.Value) (compute.Value, error) {
	return f.unary("Imag", C.LATHE_OP_IMAG, x)
}
func (f *Function) Conj(x compute.Value) (compute.Value, error) {
	return f.unary("Conj", C.LATHE_OP_CONJ, x)
}
func (f *Function) Identity(x compute.Value) (compute.Value, error) {
	return f.unary("Identity", C.LATHE_OP_IDENTITY, x)
}

func (f *Function) Add(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("Add", C.LATHE_OP_ADD, lhs, rhs)
}
func (f *Function) Sub(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("Sub", C.LATHE_OP_SUB, lhs, rhs)
}
func (f *Function) Mul(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("Mul", C.LATHE_OP_MUL, lhs, rhs)
}
func (f *Function) Div(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("Div", C.LATHE_OP_DIV, lhs, rhs)
}
func (f *Function) Rem(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("Rem", C.LATHE_OP_REM, lhs, rhs)
}
func (f *Function) Pow(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("Pow", C.LATHE_OP_POW, lhs, rhs)
}
func (f *Function) Max(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("Max", C.LATHE_OP_MAX, lhs, rhs)
}
func (f *Function) Min(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("Min", C.LATHE_OP_MIN, lhs, rhs)
}
func (f *Function) Atan2(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("Atan2", C.LATHE_OP_ATAN2, lhs, rhs)
}
func (f *Function) BitwiseAnd(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("BitwiseAnd", C.LATHE_OP_BITWISE_AND, lhs, rhs)
}
func (f *Function) BitwiseOr(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("BitwiseOr", C.LATHE_OP_BITWISE_OR, lhs, rhs)
}
func (f *Function) BitwiseXor(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("BitwiseXor", C.LATHE_OP_BITWISE_XOR, lhs, rhs)
}
func (f *Function) LogicalAnd(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("LogicalAnd", C.LATHE_OP_LOGICAL_AND, lhs, rhs)
}
func (f *Function) LogicalOr(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("LogicalOr", C.LATHE_OP_LOGICAL_OR, lhs, rhs)
}
func (f *Function) LogicalXor(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("LogicalXor", C.LATHE_OP_LOGICAL_XOR, lhs, rhs)
}
func (f *Function) ShiftLeft(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("ShiftLeft", C.LATHE_OP_SHIFT_LEFT, lhs, rhs)
}
func (f *Function) ShiftRightArithmetic(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("ShiftRightArithmetic", C.LATHE_OP_SHIFT_RIGHT_ARITHMETIC, lhs, rhs)
}
func (f *Function) ShiftRightLogical(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("ShiftRightLogical", C.LATHE_OP_SHIFT_RIGHT_LOGICAL, lhs, rhs)
}
func (f *Function) Complex(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("Complex", C.LATHE_OP_COMPLEX, lhs, rhs)
}
func (f *Function) Equal(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("Equal", C.LATHE_OP_EQUAL, lhs, rhs)
}
func (f *Function) NotEqual(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("NotEqual", C.LATHE_OP_NOT_EQUAL, lhs, rhs)
}
func (f *Function) GreaterThan(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("GreaterThan", C.LATHE_OP_GREATER_THAN, lhs, rhs)
}
func (f *Function) GreaterOrEqual(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("GreaterOrEqual", C.LATHE_OP_GREATER_OR_EQUAL, lhs, rhs)
}
func (f *Function) LessThan(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("LessThan", C.LATHE_OP_LESS_THAN, lhs, rhs)
}
func (f *Function) LessOrEqual(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("LessOrEqual", C.LATHE_OP_LESS_OR_EQUAL, lhs, rhs)
}
func (f *Function) EqualTotalOrder(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("EqualTotalOrder", C.LATHE_OP_EQUAL_TOTAL_ORDER, lhs, rhs)
}
func (f *Function) NotEqualTotalOrder(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("NotEqualTotalOrder", C.LATHE_OP_NOT_EQUAL_TOTAL_ORDER, lhs, rhs)
}
func (f *Function) GreaterThanTotalOrder(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("GreaterThanTotalOrder", C.LATHE_OP_GREATER_THAN_TOTAL_ORDER, lhs, rhs)
}
func (f *Function) GreaterOrEqualTotalOrder(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("GreaterOrEqualTotalOrder", C.LATHE_OP_GREATER_OR_EQUAL_TOTAL_ORDER, lhs, rhs)
}
func (f *Function) LessThanTotalOrder(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("LessThanTotalOrder", C.LATHE_OP_LESS_THAN_TOTAL_ORDER, lhs, rhs)
}
func (f *Function) LessOrEqualTotalOrder(lhs, rhs compute.Value) (compute.Value, error) {
	return f.binary("LessOrEqualTotalOrder", C.LATHE_OP_LESS_OR_EQUAL_TOTAL_ORDER, lhs, rhs)
}

func (f *Function) ReduceSum(x compute.Value, axes ...int) (compute.Value, error) {
	return f.reduce("ReduceSum", C.LATHE_OP_REDUCE_SUM, x, axes)
}
func (f *Function) ReduceProduct(x compute.Value, axes ...int) (compute.Value, error) {
	return f.reduce("ReduceProduct", C.LATHE_OP_REDUCE_PRODUCT, x, axes)
}
func (f *Function) ReduceMax(x compute.Value, axes ...int) (compute.Value, error) {
	return f.reduce("ReduceMax", C.LATHE_OP_REDUCE_MAX, x, axes)
}
func (f *Function) ReduceMin(x compute.Value, axes ...int) (compute.Value, error) {
	return f.reduce("ReduceMin", C.LATHE_OP_REDUCE_MIN, x, axes)
}
func (f *Function) ReduceBitwiseAnd(x compute.Value, axes ...int) (compute.Value, error) {
	return f.reduce("ReduceBitwiseAnd", C.LATHE_OP_REDUCE_BITWISE_AND, x, axes)
}
func (f *Function) ReduceBitwiseOr(x compute.Value, axes ...int) (compute.Value, error) {
	return f.reduce("ReduceBitwiseOr", C.LATHE_OP_REDUCE_BITWISE_OR, x, axes)
}
func (f *Function) ReduceBitwiseXor(x compute.Value, axes ...int) (compute.Value, error) {
	return f.reduce("ReduceBitwiseXor", C.LATHE_OP_REDUCE_BITWISE_XOR, x, axes)
}
func (f *Function) ReduceLogicalAnd(x compute.Value, axes ...int) (compute.Value, error) {
	return f.reduce("ReduceLogicalAnd", C.LATHE_OP_REDUCE_LOGICAL_AND, x, axes)
}
func (f *Function) ReduceLogicalOr(x compute.Value, axes ...int) (compute.Value, error) {
	return f.reduce("ReduceLogicalOr", C.LATHE_OP_REDUCE_LOGICAL_OR, x, axes)
}
func (f *Function) ReduceLogicalXor(x compute.Value, axes ...int) (compute.Value, error) {
	return f.reduce("ReduceLogicalXor", C.LATHE_OP_REDUCE_LOGICAL_XOR, x, axes)
}
