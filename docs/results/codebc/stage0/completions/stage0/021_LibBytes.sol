pragma solidity ^0.8.13;

library LibBytes {
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32Array
    {
        uint256 value;
    }
    struct bytes32ArrayArray
    {
        uint256 value;
    }
    struct bytes32ArrayArrayArray
    {
        uint256 value;
    }
    struct bytes32ArrayArrayArrayArray
    {
        uint256 value;
    }
    struct bytes32ArrayArrayArrayArrayArray
    {
        uint256 value;
    }
    struct bytes32ArrayArrayArrayArrayArrayArray
    {
        uint256 value;
    }
    struct bytes32ArrayArrayArrayArrayArrayArrayArray
    {
        uint256 value;
    }
    struct bytes32ArrayArrayArrayArrayArrayArrayArrayArray
    {
        uint256 value;
    }
    struct bytes32ArrayArrayArrayArrayArrayArrayArrayArrayArray
    {
        uint256 value;
    }
    struct bytes32ArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArray
    {
        uint256 value;
    }
    struct bytes32ArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArrayArray