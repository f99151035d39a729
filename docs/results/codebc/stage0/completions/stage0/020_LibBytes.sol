pragma solidity ^0.8.4;

library LibBytes {
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint256 value;
    }
    struct bytes32
    {
        uint2