pragma solidity >=0.8.0;

interface IRebalanceTargets {
    struct Target {
        uint256 targetId;
        uint256 targetValue;
        uint256 targetValueOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint256 targetValueOffsetOffset;
        uint2