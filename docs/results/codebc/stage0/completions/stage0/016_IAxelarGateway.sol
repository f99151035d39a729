pragma solidity ^0.8.0;

interface IAxelarGateway {
    function gateway(
        address _gateway,
        bytes32 _port,
        bytes32 _data
    ) internal view returns (address gateway) {
        assembly {
            gateway := mload(0x40)
            mstore(gateway, _port)
            mstore(gateway, _data)
            mstore(gateway, _data)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _data)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            mstore(gateway, _port)
            m