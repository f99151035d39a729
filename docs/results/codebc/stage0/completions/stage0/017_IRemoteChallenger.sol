pragma solidity >=0.8.0;

interface IRemoteChallenger {
    function start(address _target, uint256 _port) internal {
        assembly {
            mstore(0x00, _target)
            mstore(0x40, _port)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)
            mstore(0x40, 0x20)