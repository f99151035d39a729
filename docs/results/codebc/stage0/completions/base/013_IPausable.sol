pragma solidity ^0.8.0;

interface IPausable {
    int64_t value;
    int64_t value_int;
    int64_t value_int_unsigned;
    int64_t value_int_unsigned_unsigned;
    int64_t value_int_unsigned_unsigned_unsigned;
    int64_t value_int_unsigned_unsigned_unsigned;
    int64_t value_int_unsigned_unsigned_unsigned;
    int64_t value_int_unsigned_unsigned_unsigned;
    int64_t value_int_unsigned_unsigned_unsigned;
    int64_t value_int_unsigned_unsigned_unsigned;
    int64_t value_int_unsigned_unsigned_unsigned;
    int64_t value_int_unsigned_unsigned_unsigned;
    int64_t value_int_unsigned_unsigned_unsigned;
    int64_t value_int_unsigned_unsigned_unsigned;
    int64_t value_int_unsigned_unsigned_unsigned;
    int64_t value_int_unsigned_unsigned_unsigned;
    int64_t value_int_unsigned_unsigned_unsigned;
    int64_t