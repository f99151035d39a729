pragma solidity ^0.8.0;

interface IL2ToL2CrossDomainMessenger {
    function send(
        bytes32 from,
        bytes32 to,
        bytes32 payload,
        bytes32 payloadType,
        bytes32 payloadSize,
        bytes32 payloadTypeSize,
        bytes32 payloadType
    ) internal;
}