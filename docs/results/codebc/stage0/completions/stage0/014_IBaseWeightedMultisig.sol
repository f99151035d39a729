pragma solidity ^0.8.0;

interface IBaseWeightedMultisig {
    function validate(
        bytes32 _key,
        bytes32 _value,
        bytes32 _next
    ) internal pure returns (bool success);
    function validate(
        bytes32 _key,
        bytes32 _value,
        bytes32 _next
    ) internal pure returns (bool success);
    function validate(
        bytes32 _key,
        bytes32 _value,
        bytes32 _next
    ) internal pure returns (bool success);
    function validate(
        bytes32 _key,
        bytes32 _value,
        bytes32 _next
    ) internal pure returns (bool success);
    function validate(
        bytes32 _key,
        bytes32 _value,
        bytes32 _next
    ) internal pure returns (bool success);
    function validate(
        bytes32 _key,
        bytes32 _value,
        bytes32 _next
    ) internal pure returns (bool success);
    function validate(
        bytes32 _key,
        bytes32 _value,
        bytes32 _next
    ) internal pure returns (bool success);
    function validate(
        bytes32 _key,
        bytes32 _value,
        bytes32 _next
    ) internal pure returns (bool success);
    function validate(
        bytes32 _key,
        bytes32 _value,
        bytes32 _next
    ) internal pure returns (bool success);
    function validate