pragma solidity ^0.8.0;

interface IPythEvents {
    function event(
        bytes32 id,
        bytes calldata payload
    ) internal view returns (bool success) {
        assembly {
            success := mload(0x40)
            mstore(0x00, id)
            mstore(0x00, payload)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x00, success)
            mstore(0x0