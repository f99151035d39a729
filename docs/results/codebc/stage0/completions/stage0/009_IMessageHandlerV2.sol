pragma solidity >=0.8.0;

interface IMessageHandlerV2 {
    function handleMessage(
        bytes32 sender,
        bytes32 recipient,
        bytes32 data,
        bytes32 payload
    ) internal;
}