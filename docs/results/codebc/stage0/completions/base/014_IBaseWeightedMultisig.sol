pragma solidity ^0.8.0;

interface IBaseWeightedMultisig {
    int64_t weight;
    int64_t weight_multiplier;
    int64_t weight_multiplier_multiplier;
    int64_t weight_multiplier_multiplier_multiplier;
    int64_t weight_multiplier_multiplier_multiplier;
    int64_t weight_multiplier_multiplier_multiplier;
    int64_t weight_multiplier_multiplier_multiplier;
    int64_t weight_multiplier_multiplier_multiplier;
    int64_t weight_multiplier_multiplier_multiplier;
    int64_t weight_multiplier_multiplier_multiplier;
    int64_t weight_multiplier_multiplier_multiplier;
    int64_t weight_multiplier_multiplier_multiplier;
    int64_t weight_multiplier_multiplier_multiplier;
    int64_t weight_multiplier_multiplier_multiplier;
    int64_t weight_multiplier_multiplier_multiplier;
    int64_t weight_multiplier_multiplier_multiplier;
    int64_t weight_multiplier_multiplier_multiplier;
    int64_t weight_multiplier_multiplier_multiplier;
    int64_t weight_multiplier_multi